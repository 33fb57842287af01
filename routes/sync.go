package routes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// OpenCode's sync routes. A session's sync history is OpenCode's event
// log of the session as an aggregate: every durable event with its
// per-session seq, typed "<type>.<version>". Ours is the session's durable
// log (the v2 session.next.* events, our session.inbox.* extension, seq
// from 1), after a session.created.1 at seq 0 that carries the session as
// it is now: the v1 events OpenCode also logs (session.updated.1,
// message.updated.1, message.part.updated.1, ...) are not in our log, a
// session's messages are read with the message routes.

func (s *Server) mountSync(r chi.Router) {
	r.Post("/sync/start", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p, _, err := s.projects.reg.Open(r.Context(), s.directory(r))
		if err != nil {
			return s.gitError(r, err)
		}
		// OpenCode's startWorkspaceSyncing: a local workspace's sync is its
		// status.
		for _, ws := range s.workspaces.of(p.ID) {
			s.startWorkspaceSync(ws)
		}
		writeJSON(w, http.StatusOK, true)
		return nil
	}))
	r.Post("/sync/history", s.h(v1, s.syncHistory))
	r.Post("/sync/steal", s.h(v1, s.syncSteal))
}

// syncEvent is one event of /sync/history.
type syncEvent struct {
	ID          string          `json:"id"`
	AggregateID string          `json:"aggregate_id"`
	Seq         int64           `json:"seq"`
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data"`
}

// syncHistory lists the events of every session past the seq the client
// knows of it (its whole history for one it does not name), oldest seq
// first.
func (s *Server) syncHistory(w http.ResponseWriter, r *http.Request) error {
	var body map[string]json.RawMessage
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	if body == nil {
		return badRequest("Payload", "", "Expected an object of aggregate IDs and sequence numbers")
	}
	known := make(map[string]int64, len(body))
	for id, raw := range body {
		n, err := seqValue(raw)
		if err != nil {
			return badRequest("Payload", id, fmt.Sprintf("%s at [%q]", err.Error(), id))
		}
		known[id] = n
	}
	ctx := r.Context()
	all, err := s.m.ListSessions(ctx)
	if err != nil {
		return err
	}
	slices.SortStableFunc(all, func(a, b opencode.Session) int {
		if a.Time.Created != b.Time.Created {
			return int(a.Time.Created - b.Time.Created)
		}
		return strings.Compare(a.ID, b.ID)
	})
	type tagged struct {
		ev  syncEvent
		ord int
	}
	var out []tagged
	for i, ss := range all {
		after, ok := known[ss.ID]
		if !ok {
			info, err := json.Marshal(ss)
			if err != nil {
				return err
			}
			data, _ := json.Marshal(map[string]json.RawMessage{"sessionID": mustQuote(ss.ID), "info": info})
			out = append(out, tagged{syncEvent{ID: createdEventID(ss.ID), AggregateID: ss.ID, Seq: 0,
				Type: opencode.EvSessionCreated + ".1", Data: data}, i})
			after = 0
		}
		evs, err := s.m.Events(ctx, ss.ID, after, 0)
		if err != nil {
			if isNotFound(err) {
				continue // deleted meanwhile
			}
			return err
		}
		for _, e := range evs {
			data := e.Data
			if len(bytes.TrimSpace(data)) == 0 {
				data = json.RawMessage("{}")
			}
			out = append(out, tagged{syncEvent{ID: e.ID, AggregateID: ss.ID, Seq: e.Seq,
				Type: e.Type + "." + strconv.Itoa(max(e.Version, 1)), Data: data}, i})
		}
	}
	slices.SortStableFunc(out, func(a, b tagged) int {
		if a.ev.Seq != b.ev.Seq {
			if a.ev.Seq < b.ev.Seq {
				return -1
			}
			return 1
		}
		return a.ord - b.ord
	})
	list := make([]syncEvent, len(out))
	for i, t := range out {
		list[i] = t.ev
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func mustQuote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// seqValue is one value of a history request: a whole number >= 0.
func seqValue(raw json.RawMessage) (int64, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || isNull(raw) {
		return 0, fmt.Errorf("Expected number, got %s", strings.TrimSpace(string(raw)))
	}
	if f < 0 {
		return 0, fmt.Errorf("Expected a value greater than or equal to 0, got %s", strings.TrimSpace(string(raw)))
	}
	if f != math.Trunc(f) || f > 1<<53 {
		return 0, fmt.Errorf("Expected an integer, got %s", strings.TrimSpace(string(raw)))
	}
	return int64(f), nil
}

// createdEventID is the ID of a session's session.created.1: the event
// ID of the session's creation time, the same on every call (a session ID
// is a descending ID: its time field bitwise inverted).
func createdEventID(sessionID string) string {
	body, ok := strings.CutPrefix(sessionID, string(identifier.Session)+"_")
	if !ok || len(body) < 12 {
		return string(identifier.Event) + "_" + body
	}
	v, err := strconv.ParseUint(body[:12], 16, 64)
	if err != nil {
		return string(identifier.Event) + "_" + body
	}
	return fmt.Sprintf("%s_%012x%s", identifier.Event, ^v&(1<<48-1), body[12:])
}

// syncSteal makes a session one of the workspace the request names
// (?workspace=): OpenCode's steal, which a control plane sends after it
// replayed a session's history into this server.
func (s *Server) syncSteal(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		SessionID *string `json:"sessionID"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	if body.SessionID == nil {
		return badRequest("Payload", "sessionID", `Missing key at ["sessionID"]`)
	}
	if err := checkID(identifier.Session, *body.SessionID, "sessionID"); err != nil {
		return err
	}
	wid := r.URL.Query().Get("workspace")
	if wid == "" {
		// OpenCode: "Cannot steal session without workspace context".
		writeJSON(w, http.StatusBadRequest, map[string]any{"_tag": "BadRequest"})
		return nil
	}
	if _, ok := s.workspaces.get(wid); !ok {
		return badRequest("Query", "workspace", "Workspace not found: "+wid)
	}
	if _, err := s.m.UpdateSession(detach(r.Context()), *body.SessionID, opencode.SessionPatch{WorkspaceID: &wid}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"sessionID": *body.SessionID})
	return nil
}
