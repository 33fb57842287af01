package acp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// A prompt's way in and out: its content blocks read into the core's parts,
// session/prompt admitted and answered at its turn's end, and the steers,
// revokes and replaces of inputs not yet delivered.

// promptRun is one session/prompt request: its input, and the steers
// injected into its turn (the reply waits for them: one turn settles
// once, at its real end).
type promptRun struct {
	id     string
	steers []string
	// cancelled: session/cancel stopped its turn; a steer that comes
	// after belongs to the next turn, never to this one's reply.
	cancelled bool
}

// slash expands a prompt that starts with /NAME into that command's
// prompt (as POST /session/{id}/command does: arguments, !`cmd` output,
// @references), with its agent; the prompt's other parts follow.
func (a *Agent) slash(ctx context.Context, sessionID string, parts []opencode.Part) (agent string, _ []opencode.Part) {
	if len(parts) == 0 || !strings.HasPrefix(parts[0].Text, "/") {
		return "", parts
	}
	name, args, _ := strings.Cut(strings.TrimPrefix(parts[0].Text, "/"), " ")
	s, err := a.core.GetSession(a.life, sessionID)
	if err != nil {
		return "", parts
	}
	for _, c := range a.commands(s.Directory) {
		if c.Name == name {
			home, _ := os.UserHomeDir()
			isAgent := func(n string) bool {
				for _, ag := range a.core.Agents() {
					if ag.Name == n {
						return true
					}
				}
				return false
			}
			head := command.Prompt(ctx, c.Template, strings.TrimSpace(args), s.Directory, home, isAgent, a.ids.NewPart)
			return c.Agent, append(head, parts[1:]...)
		}
	}
	return "", parts
}

// parts turns ACP content blocks into a prompt's parts.
func (a *Agent) parts(blocks []contentBlock) ([]opencode.Part, error) {
	if len(blocks) == 0 {
		return nil, invalid("prompt is empty")
	}
	var out []opencode.Part
	var text []string
	skipped := 0
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "resource_link":
			text = append(text, "@"+strings.TrimPrefix(b.URI, "file://"))
			out = append(out, opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartFile, URL: b.URI,
				Filename: b.Name, Mime: orText(b.MimeType)})
		case "resource":
			if b.Resource == nil {
				return nil, invalid("resource block without resource")
			}
			if b.Resource.Text != "" {
				text = append(text, "<context ref=\""+b.Resource.URI+"\">\n"+b.Resource.Text+"\n</context>")
			} else {
				out = append(out, opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartFile,
					URL: "data:" + orText(b.Resource.MimeType) + ";base64," + b.Resource.Blob, Mime: orText(b.Resource.MimeType),
					Filename: filepath.Base(b.Resource.URI)})
			}
		case "image":
			if _, err := base64.StdEncoding.DecodeString(b.Data); err != nil {
				return nil, invalid("image data is not base64")
			}
			out = append(out, opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartFile,
				URL: "data:" + b.MimeType + ";base64," + b.Data, Mime: b.MimeType, Filename: "image"})
		default:
			if a.v2.Load() {
				// v2: unknown (or _-prefixed) block types are tolerated,
				// left out of what the model gets.
				skipped++
				continue
			}
			return nil, invalid("unsupported content block type " + b.Type)
		}
	}
	if skipped == len(blocks) {
		return nil, invalid("prompt has no content block of a known type")
	}
	head := opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartText, Text: strings.Join(text, "\n")}
	return append([]opencode.Part{head}, out...), nil
}

func orText(mime string) string {
	if mime == "" {
		return "text/plain"
	}
	return mime
}

// contentBlock is an ACP ContentBlock (the kinds a prompt may carry).
type contentBlock struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	Data     string    `json:"data,omitempty"`
	MimeType string    `json:"mimeType,omitempty"`
	URI      string    `json:"uri,omitempty"`
	Name     string    `json:"name,omitempty"`
	Resource *resource `json:"resource,omitempty"`
}

type resource struct {
	URI      string `json:"uri"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
	Meta      struct {
		// MessageID is a client-chosen msg_ ID (as HTTP's messageID): the
		// client knows it before the reply (to revoke or replace the
		// input), and a re-sent prompt with it is admitted once.
		MessageID string `json:"messageId"`
	} `json:"_meta"`
}

// messageID takes the client's ID or mints one.
func (a *Agent) messageID(client string) (id string, minted bool, err error) {
	if client == "" {
		return a.ids.NewMessage(), true, nil
	}
	if err := identifier.Check(identifier.Message, client); err != nil {
		return "", false, invalid("_meta.messageId: " + err.Error())
	}
	return client, false, nil
}

// input is the input a prompt or a steer admits, on a session this
// connection then follows: its parts, and the client's message ID or a
// fresh one.
func (a *Agent) input(ctx context.Context, sessionID string, blocks []contentBlock, clientID string,
	delivery opencode.Delivery) (*attached, *opencode.Input, error) {
	parts, err := a.parts(blocks)
	if err != nil {
		return nil, nil, err
	}
	at, err := a.attach(ctx, sessionID, false)
	if err != nil {
		return nil, nil, err
	}
	id, minted, err := a.messageID(clientID)
	if err != nil {
		return nil, nil, err
	}
	return at, &opencode.Input{ID: id, Minted: minted, SessionID: sessionID, Delivery: delivery, Parts: parts}, nil
}

// prompt admits a prompt as a queued input (concurrent prompts run in
// order) and answers at the end of its turn, after any steer injected into
// it. A `$/cancel_request` while it is still pending revokes it.
func (a *Agent) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p promptParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	at, in, err := a.input(ctx, p.SessionID, p.Prompt, p.Meta.MessageID, opencode.Queue)
	if err != nil {
		return nil, err
	}
	in.Agent, in.Parts = a.slash(ctx, p.SessionID, in.Parts)
	id := in.ID
	run := &promptRun{id: id}
	at.mu.Lock()
	at.runs = append(at.runs, run)
	at.mu.Unlock()
	if _, _, err := a.core.Admit(context.WithoutCancel(ctx), in); err != nil {
		at.finish(run)
		return nil, coreError(err)
	}
	// The rest waits for the turn's end, concurrently with the next
	// requests (a steer, a cancel, another prompt).
	return later(func() (any, error) {
		defer at.finish(run)
		waited := make(chan struct{})
		defer close(waited)
		go func() {
			select {
			case <-ctx.Done():
				// $/cancel_request: revoke it if it is still pending (a
				// delivered one runs on; session/cancel stops a turn). A
				// client that goes away cancels nothing: what was admitted
				// runs.
				if errors.Is(context.Cause(ctx), errCancelRequest) {
					_, _ = a.core.Revoke(context.Background(), p.SessionID, id)
				}
			case <-waited:
			}
		}()
		// Waited for under the connection's life (not the request's: a
		// $/cancel_request of a delivered prompt still gets its real end).
		res, err := a.core.Wait(a.life, p.SessionID, id)
		var oe *opencode.Error
		if errors.As(err, &oe) && oe.Code == opencode.ERevoked {
			return nil, &rpcError{Code: codeCancelled, Message: "Request cancelled: the prompt was revoked before it was delivered"}
		}
		if err != nil {
			return nil, coreError(err)
		}
		// Steers injected into this turn: the turn settles once, at the
		// end of the last of them (a steer that arrived as the turn ended
		// runs in the turn the core started for it).
		for i := 0; ; i++ {
			at.mu.Lock()
			if run.cancelled || i >= len(run.steers) {
				at.mu.Unlock()
				break
			}
			sid := run.steers[i]
			at.mu.Unlock()
			if r, err := a.core.Wait(a.life, p.SessionID, sid); err == nil {
				res = r
			}
		}
		// Every update of the turn is written before the reply that ends it.
		fctx, cancel := context.WithTimeout(a.life, 5*time.Second)
		a.core.Flushed(fctx, res, p.SessionID)
		cancel()
		reason := stopReason(res.Message)
		at.mu.Lock()
		if run.cancelled {
			// ACP: a prompt session/cancel was sent for answers cancelled.
			reason = "cancelled"
		}
		at.mu.Unlock()
		return map[string]any{"stopReason": reason, "_meta": map[string]any{"messageId": id}}, nil
	}), nil
}

// stopReason says why a turn ended, from its last assistant message.
func stopReason(m opencode.MessageWithParts) string {
	if e := m.Info.Error; e != nil && e.Name == "MessageAbortedError" {
		return "cancelled"
	}
	if m.Info.Finish == "length" { // the provider's finish when max_tokens cut it
		return "max_tokens"
	}
	return "end_turn"
}

// finish drops an answered prompt run.
func (at *attached) finish(run *promptRun) {
	at.mu.Lock()
	defer at.mu.Unlock()
	for i, r := range at.runs {
		if r == run {
			at.runs = append(at.runs[:i], at.runs[i+1:]...)
			return
		}
	}
}

type steerParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
	Meta      struct {
		Steering struct {
			IdleBehavior string `json:"idleBehavior"`
		} `json:"steering"`
		MessageID string `json:"messageId"` // client-chosen, as for session/prompt
	} `json:"_meta"`
}

// steer is `_session/steering`: into the running turn, atomically, or (when
// idle) a new turn or nothing, as the client asked.
func (a *Agent) steer(ctx context.Context, params json.RawMessage) (any, error) {
	var p steerParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	at, in, err := a.input(ctx, p.SessionID, p.Prompt, p.Meta.MessageID, opencode.Steer)
	if err != nil {
		return nil, err
	}
	id := in.ID
	ctx = context.WithoutCancel(ctx)
	_, _, running, err := a.core.AdmitIfRunning(ctx, in)
	if err != nil {
		return nil, coreError(err)
	}
	meta := map[string]any{"messageId": id}
	if running {
		at.mu.Lock()
		// The running turn is the first prompt not cancelled (a cancelled
		// one's turn has ended; the turn running now is the next's).
		for _, run := range at.runs {
			if !run.cancelled {
				run.steers = append(run.steers, id)
				break
			}
		}
		at.mu.Unlock()
		return map[string]any{"outcome": "injected", "_meta": meta}, nil
	}
	if p.Meta.Steering.IdleBehavior == "promptRequired" {
		return map[string]any{"outcome": "promptRequired", "reason": "noRunningTurn"}, nil
	}
	if _, _, err := a.core.Admit(ctx, in); err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"outcome": "startedNewTurn", "_meta": meta}, nil
}

type inputRef struct {
	SessionID string `json:"sessionId"`
	MessageID string `json:"messageId"`
}

// revoke is `_opencode-server/revoke`: cancel one pending input by its
// message ID (a prompt's, from its reply's or its echo's messageId, or a
// steer's).
func (a *Agent) revoke(ctx context.Context, params json.RawMessage) (any, error) {
	var p inputRef
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	revoked, err := a.core.Revoke(context.WithoutCancel(ctx), p.SessionID, p.MessageID)
	if err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"revoked": revoked}, nil
}

// replace is `_opencode-server/replace`: new content and/or delivery for a
// pending input, under the same message ID.
func (a *Agent) replace(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		inputRef
		Prompt   []contentBlock     `json:"prompt"`
		Delivery *opencode.Delivery `json:"delivery"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	var parts []opencode.Part
	if p.Prompt != nil {
		var err error
		if parts, err = a.parts(p.Prompt); err != nil {
			return nil, err
		}
	}
	in, err := a.core.Replace(context.WithoutCancel(ctx), p.SessionID, p.MessageID, p.Delivery, parts)
	if err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"messageId": in.ID, "delivery": in.Delivery}, nil
}
