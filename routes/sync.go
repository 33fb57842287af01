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
// session's messages are read with the message routes; but for a session
// replayed from another server (/sync/replay), whose log holds its history
// as it came, those events too.

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
	r.Post("/sync/replay", s.h(v1, s.syncReplay))
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

// syncReplay imports another server's sync history of one session (what
// its /sync/history answered, aggregate_id spelt aggregateID): a control
// plane warps the session into this server so. The body is checked as
// OpenCode checks it, in its words; the history itself by the core
// (lifecycle.Manager.Replay). The directory is the one the control plane
// replays into; as in OpenCode it is only logged (the session keeps its
// own).
func (s *Server) syncReplay(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength == 0 {
		return badRequest("Payload", "", "Expected object, got undefined")
	}
	var raw json.RawMessage
	if err := decodeBody(r, &raw, false); err != nil {
		return err
	}
	dir, events, err := replayBody(raw)
	if err != nil {
		return err
	}
	id, err := s.m.Replay(detach(r.Context()), events)
	if err != nil {
		return err
	}
	s.log.Info("sync replay", "session", id, "events", len(events), "first", events[0].Seq,
		"last", events[len(events)-1].Seq, "directory", dir)
	writeJSON(w, http.StatusOK, map[string]string{"sessionID": id})
	return nil
}

// replayBody checks a replay body against OpenCode's SyncReplayInput, key
// by key in its order, and answers its first issue as OpenCode words it.
func replayBody(raw json.RawMessage) (string, []opencode.SyncEvent, error) {
	issue := func(msg string, path ...any) error {
		field := make([]string, len(path))
		for i, p := range path {
			field[i] = fmt.Sprint(p)
		}
		return badRequest("Payload", strings.Join(field, "."), opencode.SchemaIssue(msg, path...))
	}
	expected := func(kind string, v json.RawMessage, path ...any) error {
		return issue("Expected "+kind+", got "+opencode.Shown(v), path...)
	}
	var body map[string]json.RawMessage
	if !isObject(raw) || json.Unmarshal(raw, &body) != nil {
		return "", nil, expected("object", raw)
	}
	var dir string
	v, ok := body["directory"]
	if !ok {
		return "", nil, issue("Missing key", "directory")
	}
	if json.Unmarshal(v, &dir) != nil || isNull(v) {
		return "", nil, expected("string", v, "directory")
	}
	v, ok = body["events"]
	if !ok {
		return "", nil, issue("Missing key", "events")
	}
	var items []json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' || json.Unmarshal(v, &items) != nil {
		return "", nil, expected("array", v, "events")
	}
	if len(items) == 0 {
		return "", nil, issue("Missing key", "events", 0)
	}
	events := make([]opencode.SyncEvent, len(items))
	for i, item := range items {
		var ev map[string]json.RawMessage
		if !isObject(item) || json.Unmarshal(item, &ev) != nil {
			return "", nil, expected("object", item, "events", i)
		}
		str := func(key string) (string, error) {
			v, ok := ev[key]
			if !ok {
				return "", issue("Missing key", "events", i, key)
			}
			var s string
			if json.Unmarshal(v, &s) != nil || isNull(v) {
				return "", expected("string", v, "events", i, key)
			}
			return s, nil
		}
		e := &events[i]
		var err error
		if e.ID, err = str("id"); err != nil {
			return "", nil, err
		}
		if !strings.HasPrefix(e.ID, string(identifier.Event)+"_") {
			return "", nil, issue(fmt.Sprintf("Expected a string starting with %q, got %s", string(identifier.Event)+"_", strconv.Quote(e.ID)), "events", i, "id")
		}
		if e.AggregateID, err = str("aggregateID"); err != nil {
			return "", nil, err
		}
		seq, ok := ev["seq"]
		if !ok {
			return "", nil, issue("Missing key", "events", i, "seq")
		}
		var f float64
		if json.Unmarshal(seq, &f) != nil || isNull(seq) {
			return "", nil, expected("number", seq, "events", i, "seq")
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53-1 {
			// Effect's Int: a safe integer.
			return "", nil, issue("Expected an integer, got "+opencode.Shown(seq), "events", i, "seq")
		}
		if f < 0 {
			return "", nil, issue("Expected a value greater than or equal to 0, got "+opencode.Shown(seq), "events", i, "seq")
		}
		e.Seq = int64(f)
		if e.Type, err = str("type"); err != nil {
			return "", nil, err
		}
		data, ok := ev["data"]
		if !ok {
			return "", nil, issue("Missing key", "events", i, "data")
		}
		if !isObject(data) {
			return "", nil, expected("object", data, "events", i, "data")
		}
		e.Data = data
	}
	return dir, events, nil
}

func isObject(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && t[0] == '{'
}
