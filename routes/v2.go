package routes

import (
	"net/http"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

func (s *Server) mountV2(r chi.Router) {
	r.Post("/api/session", s.h(v2, s.v2CreateSession))
	r.Get("/api/session", s.h(v2, s.v2ListSessions))
	r.Get("/api/session/active", s.h(v2, s.v2Active))
	r.Get("/api/event", s.v2AllEvents)
	r.Route("/api/session/{sessionID}", func(r chi.Router) {
		r.Get("/", s.h(v2, s.v2GetSession))
		r.Post("/prompt", s.h(v2, s.v2Prompt))
		r.Post("/interrupt", s.h(v2, s.v2Interrupt))
		r.Post("/wait", s.h(v2, s.v2Wait))
		r.Get("/message", s.h(v2, s.v2Messages))
		r.Get("/message/{messageID}", s.h(v2, s.v2Message))
		r.Get("/history", s.h(v2, s.v2History))
		r.Get("/context", s.h(v2, s.v2Context))
		r.Post("/agent", s.h(v2, s.v2SwitchAgent))
		r.Post("/model", s.h(v2, s.v2SwitchModel))
		r.Get("/event", s.h(v2, s.v2SessionEvents))
		r.Get("/inbox", s.h(v2, s.inbox))
		r.Delete("/inbox/{messageID}", s.h(v2, s.revoke))
		r.Patch("/inbox/{messageID}", s.h(v2, s.patchInbox))
	})
}

// sessionV2 is the v2 SessionV2Info view of a session.
type sessionV2 struct {
	ID        string             `json:"id"`
	ParentID  string             `json:"parentID,omitempty"`
	ProjectID string             `json:"projectID"`
	Agent     string             `json:"agent,omitempty"`
	Model     *opencode.ModelRef `json:"model,omitempty"`
	Cost      float64            `json:"cost"`
	Tokens    tokensV2           `json:"tokens"`
	Time      struct {
		Created  int64    `json:"created"`
		Updated  int64    `json:"updated"`
		Archived *float64 `json:"archived,omitempty"`
	} `json:"time"`
	Title    string      `json:"title"`
	Location locationRef `json:"location"`
	Subpath  string      `json:"subpath,omitempty"`
}

type tokensV2 struct {
	Input     int64               `json:"input"`
	Output    int64               `json:"output"`
	Reasoning int64               `json:"reasoning"`
	Cache     opencode.CacheUsage `json:"cache"`
}

type locationRef struct {
	Directory   string `json:"directory"`
	WorkspaceID string `json:"workspaceID,omitempty"`
}

func toV2(s opencode.Session) sessionV2 {
	v := sessionV2{ID: s.ID, ParentID: s.ParentID, ProjectID: s.ProjectID, Agent: s.Agent, Model: s.Model,
		Cost: s.Cost, Title: s.Title, Location: locationRef{Directory: s.Directory, WorkspaceID: s.WorkspaceID}, Subpath: s.Path,
		Tokens: tokensV2{Input: s.Tokens.Input, Output: s.Tokens.Output, Reasoning: s.Tokens.Reasoning, Cache: s.Tokens.Cache}}
	v.Time.Created, v.Time.Updated, v.Time.Archived = s.Time.Created, s.Time.Updated, s.Time.Archived
	return v
}

type v2CreateBody struct {
	ID       string             `json:"id,omitempty"`
	Agent    string             `json:"agent,omitempty"`
	Model    *opencode.ModelRef `json:"model,omitempty"`
	Location *locationRef       `json:"location,omitempty"`
}

func (s *Server) v2CreateSession(w http.ResponseWriter, r *http.Request) error {
	var b v2CreateBody
	if err := decodeBody(r, &b, true); err != nil {
		return err
	}
	id, minted := b.ID, false
	if id != "" {
		if err := checkID(identifier.Session, id, "id"); err != nil {
			return err
		}
	} else {
		id, minted = s.ids.NewSession(), true
	}
	if b.Model != nil && (b.Model.ID == "" || b.Model.ProviderID == "") {
		return badRequest("Payload", "model", "model needs id and providerID")
	}
	dir := s.directory(r)
	if b.Location != nil {
		if !filepath.IsAbs(b.Location.Directory) {
			return badRequest("Payload", "location.directory", "location.directory must be an absolute path")
		}
		dir = filepath.Clean(b.Location.Directory)
	}
	sess, _, err := s.m.CreateSession(detach(r.Context()), opencode.SessionOptions{ID: id, Minted: minted, Agent: b.Agent, Model: b.Model, Directory: dir})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": toV2(sess)})
	return nil
}

func (s *Server) v2ListSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := pageLimit(r, 50)
	if err != nil {
		return err
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return badRequest("Query", "order", "Expected \"asc\" or \"desc\" at [\"order\"]")
	}
	var cur *pageCursor
	if v := q.Get("cursor"); v != "" {
		c, err := parseCursor(v)
		if err != nil || c.Anchor == nil {
			return errCursor
		}
		cur, order = &c, c.Order
	}
	all, err := s.m.ListSessions(r.Context())
	if err != nil {
		return err
	}
	// Newest created first (oldest with order=asc), ties by ID (ses_ IDs
	// descend with time, so the smaller is the newer): a total order an
	// anchor can point into.
	before := func(a, b opencode.Session) bool {
		if a.Time.Created != b.Time.Created {
			return (a.Time.Created > b.Time.Created) != (order == "asc")
		}
		return (a.ID < b.ID) != (order == "asc")
	}
	sort.SliceStable(all, func(i, j int) bool { return before(all[i], all[j]) })
	search := strings.ToLower(q.Get("search"))
	dir := q.Get("directory")
	matched := all[:0:0]
	for _, ss := range all {
		if search != "" && !strings.Contains(strings.ToLower(ss.Title), search) {
			continue
		}
		if dir != "" && ss.Directory != dir {
			continue
		}
		matched = append(matched, ss)
	}
	start, end := 0, len(matched)
	if cur != nil {
		a := opencode.Session{ID: cur.Anchor.ID, Time: opencode.SessionTime{Created: cur.Anchor.Time}}
		// The anchor need not exist any more: its position is enough.
		i := sort.Search(len(matched), func(i int) bool { return !before(matched[i], a) })
		if cur.Anchor.Direction == "next" {
			if i < len(matched) && matched[i].ID == a.ID {
				i++
			}
			start = i
		} else {
			end = i
		}
	}
	if end-start > limit {
		if cur != nil && cur.Anchor.Direction == "previous" {
			start = end - limit
		} else {
			end = start + limit
		}
	}
	out := make([]sessionV2, 0, end-start)
	for _, ss := range matched[start:end] {
		out = append(out, toV2(ss))
	}
	var prev, next pageCursor
	if n := len(out); n > 0 {
		o := ""
		if order == "asc" {
			o = "asc"
		}
		first, last := matched[start], matched[end-1]
		prev = pageCursor{Anchor: &sessionAnchor{ID: first.ID, Time: first.Time.Created, Direction: "previous"}, Order: o}
		next = pageCursor{Anchor: &sessionAnchor{ID: last.ID, Time: last.Time.Created, Direction: "next"}, Order: o}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "cursor": cursors(len(out) == 0, prev, next)})
	return nil
}

func (s *Server) v2Active(w http.ResponseWriter, r *http.Request) error {
	status, err := s.m.SessionStatus(r.Context())
	if err != nil {
		return err
	}
	out := map[string]any{}
	for id := range status {
		out[id] = map[string]any{"type": "running"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
	return nil
}

func (s *Server) v2GetSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	sess, err := s.m.GetSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": toV2(sess)})
	return nil
}
