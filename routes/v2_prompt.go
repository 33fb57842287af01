package routes

// v2 prompting: admit an input, interrupt a turn, wait for idle.

import (
	"encoding/json"
	"mime"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

type promptInputV2 struct {
	Text  *string `json:"text" validate:"required"`
	Files []struct {
		URI         string          `json:"uri" validate:"required"`
		Name        string          `json:"name,omitempty"`
		Description string          `json:"description,omitempty"`
		Source      json.RawMessage `json:"source,omitempty"`
	} `json:"files,omitempty" validate:"dive"`
	Agents []struct {
		Name   string          `json:"name" validate:"required"`
		Source json.RawMessage `json:"source,omitempty"`
	} `json:"agents,omitempty" validate:"dive"`
}

type v2PromptBody struct {
	ID       string            `json:"id,omitempty"`
	Prompt   *promptInputV2    `json:"prompt" validate:"required"`
	Delivery opencode.Delivery `json:"delivery,omitempty"`
	Resume   *bool             `json:"resume,omitempty"`
}

// decodeV2Input turns a v2 prompt into user parts: one text part, then a
// file part per file (mime from a data: URI, a trailing slash, or the
// extension), then an agent part per agent.
func (s *Server) decodeV2Prompt(p *promptInputV2) []opencode.Part {
	parts := []opencode.Part{{ID: s.ids.NewPart(), Type: opencode.PartText, Text: *p.Text}}
	for _, f := range p.Files {
		parts = append(parts, opencode.Part{ID: s.ids.NewPart(), Type: opencode.PartFile, URL: f.URI,
			Mime: mimeOf(f.URI), Filename: f.Name, Source: []byte(f.Source)})
	}
	for _, a := range p.Agents {
		parts = append(parts, opencode.Part{ID: s.ids.NewPart(), Type: opencode.PartAgent, Name: a.Name, Source: []byte(a.Source)})
	}
	return parts
}

func mimeOf(uri string) string {
	if rest, ok := strings.CutPrefix(uri, "data:"); ok {
		if i := strings.IndexAny(rest, ";,"); i > 0 {
			return rest[:i]
		}
		return "text/plain"
	}
	if strings.HasSuffix(uri, "/") {
		return "application/x-directory"
	}
	if t := mime.TypeByExtension(filepath.Ext(uri)); t != "" {
		if i := strings.IndexByte(t, ';'); i > 0 {
			t = t[:i]
		}
		return t
	}
	return "text/plain"
}

func (s *Server) v2Prompt(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b v2PromptBody
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if err := validate.Struct(b); err != nil {
		return validationError(err, "")
	}
	if b.Delivery == "" {
		b.Delivery = opencode.Steer
	} else if !b.Delivery.Valid() {
		return badRequest("Payload", "delivery", "Expected \"steer\" or \"queue\" at [\"delivery\"]")
	}
	mid, minted, err := s.messageIDOr(b.ID, "id")
	if err != nil {
		return err
	}
	in := &opencode.Input{ID: mid, Minted: minted, SessionID: id, Delivery: b.Delivery, Parts: s.decodeV2Prompt(b.Prompt)}
	out, _, err := s.m.Admit(detach(r.Context()), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out.Admitted()})
	return nil
}

func (s *Server) v2Interrupt(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := s.m.Abort(detach(r.Context()), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) v2Wait(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := s.m.WaitIdle(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
