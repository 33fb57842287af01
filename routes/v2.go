package routes

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/lifecycle"
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
		Cost: s.Cost, Title: s.Title, Location: locationRef{Directory: s.Directory}, Subpath: s.Path,
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
	id := b.ID
	if id != "" {
		if err := checkID(identifier.Session, id, "id"); err != nil {
			return err
		}
	} else {
		id = identifier.NewSession()
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
	sess, _, err := s.m.CreateSession(detach(r.Context()), lifecycle.SessionOptions{ID: id, Agent: b.Agent, Model: b.Model, Directory: dir})
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
	out := map[string]any{}
	for id := range s.m.Status() {
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
func decodeV2Prompt(p *promptInputV2) []opencode.Part {
	parts := []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: *p.Text}}
	for _, f := range p.Files {
		parts = append(parts, opencode.Part{ID: identifier.NewPart(), Type: opencode.PartFile, URL: f.URI,
			Mime: mimeOf(f.URI), Filename: f.Name, Source: []byte(f.Source)})
	}
	for _, a := range p.Agents {
		parts = append(parts, opencode.Part{ID: identifier.NewPart(), Type: opencode.PartAgent, Name: a.Name, Source: []byte(a.Source)})
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
	mid, err := messageIDOr(b.ID, "id")
	if err != nil {
		return err
	}
	in := &opencode.Input{ID: mid, SessionID: id, Delivery: b.Delivery, Parts: decodeV2Prompt(b.Prompt)}
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

// messageV2 projects a v1 message with parts onto the v2 SessionMessage shape.
func messageV2(mp opencode.MessageWithParts) map[string]any {
	info := mp.Info
	if info.Role == opencode.User {
		p := opencode.PromptOf(mp.Parts)
		out := map[string]any{"id": info.ID, "type": "user", "text": p.Text, "time": map[string]any{"created": info.Time.Created}}
		if len(p.Files) > 0 {
			out["files"] = p.Files
		}
		if len(p.Agents) > 0 {
			out["agents"] = p.Agents
		}
		return out
	}
	content := []map[string]any{}
	for _, p := range mp.Parts {
		switch p.Type {
		case opencode.PartText:
			content = append(content, map[string]any{"type": "text", "id": p.ID, "text": p.Text})
		case opencode.PartReasoning:
			content = append(content, map[string]any{"type": "reasoning", "id": p.ID, "text": p.Text})
		case opencode.PartTool:
			content = append(content, toolV2(p))
		}
	}
	t := map[string]any{"created": info.Time.Created}
	if info.Time.Completed != nil {
		t["completed"] = *info.Time.Completed
	}
	out := map[string]any{"id": info.ID, "type": "assistant", "agent": info.Agent, "time": t,
		"model": map[string]any{"id": info.ModelID, "providerID": info.ProviderID}, "content": content,
		"cost": info.Cost, "tokens": tokensV2{Input: info.Tokens.Input, Output: info.Tokens.Output,
			Reasoning: info.Tokens.Reasoning, Cache: info.Tokens.Cache}}
	if info.Finish != "" {
		out["finish"] = info.Finish
	}
	if info.Error != nil {
		msg, _ := info.Error.Data["message"].(string)
		out["error"] = map[string]any{"type": "unknown", "message": msg}
		out["finish"] = "error"
	}
	return out
}

// toolV2 is a tool part as v2 assistant content: OpenCode names it by its
// call ID and keeps created/ran/completed times.
func toolV2(p opencode.Part) map[string]any {
	st := p.State
	if st == nil {
		st = &opencode.ToolState{Status: "pending"}
	}
	input := st.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	state := map[string]any{"status": st.Status, "input": input}
	times := map[string]any{}
	if st.Time != nil {
		times["created"] = st.Time.Start
		times["ran"] = st.Time.Start
		if st.Time.End != nil {
			times["completed"] = *st.Time.End
		}
	}
	switch st.Status {
	case "completed":
		structured, content := opencode.ToolOutcome(p)
		state["structured"], state["content"], state["outputPaths"] = structured, content, []string{}
	case "error":
		state["structured"], state["content"] = map[string]any{}, []any{}
		state["error"] = map[string]any{"type": "unknown", "message": st.Error}
		state["result"] = map[string]any{"type": "error", "value": st.Error}
	}
	return map[string]any{"type": "tool", "id": p.CallID, "name": p.Tool, "provider": opencode.ToolProvider,
		"state": state, "time": times}
}

func (s *Server) v2Messages(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, err := pageLimit(r, 100)
	if err != nil {
		return err
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return badRequest("Query", "order", "Expected \"asc\" or \"desc\" at [\"order\"]")
	}
	pq := lifecycle.PageQuery{Limit: limit}
	if v := q.Get("cursor"); v != "" {
		if order != "" {
			return badRequest("Query", "cursor", "Do not combine cursor with order")
		}
		c, err := parseCursor(v)
		if err != nil || c.ID == "" {
			return errCursor
		}
		order, pq.Anchor, pq.Before = c.Order, c.ID, c.Direction == "previous"
	}
	if order == "" {
		order = "desc" // newest first, as the real server
	}
	pq.Desc = order == "desc"
	msgs, err := s.m.MessagesPage(r.Context(), id, pq)
	if err != nil {
		var oe *opencode.Error
		if errors.As(err, &oe) && oe.Code == opencode.EInvalid {
			return errCursor
		}
		return err
	}
	out := make([]map[string]any, 0, len(msgs))
	for _, mp := range msgs {
		out = append(out, messageV2(mp))
	}
	var prev, next pageCursor
	if n := len(msgs); n > 0 {
		prev = pageCursor{ID: msgs[0].Info.ID, Order: order, Direction: "previous"}
		next = pageCursor{ID: msgs[n-1].Info.ID, Order: order, Direction: "next"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "cursor": cursors(len(out) == 0, prev, next)})
	return nil
}

func (s *Server) v2Message(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	mid, err := messageID(r)
	if err != nil {
		return err
	}
	mp, err := s.m.Message(r.Context(), id, mid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": messageV2(mp)})
	return nil
}

// cursorParam parses an exclusive, non-negative integer cursor.
func cursorParam(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, badRequest("Query", name, "Expected an integer within range at [\""+name+"\"]")
	}
	if err != nil {
		return 0, badRequest("Query", name, "Expected an integer, got NaN at [\""+name+"\"]")
	}
	if n < 0 {
		return 0, badRequest("Query", name, "Expected a non-negative integer at [\""+name+"\"]")
	}
	return n, nil
}

func (s *Server) v2History(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	after, err := cursorParam(r.URL.Query().Get("after"), "after")
	if err != nil {
		return err
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("Query", "limit", "Expected an integer from 1 to 100 at [\"limit\"]")
		}
		limit = n
	}
	evs, err := s.m.Events(r.Context(), id, after, limit+1)
	if err != nil {
		return err
	}
	more := len(evs) > limit
	if more {
		evs = evs[:limit]
	}
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(durablePayload(e))
	}
	b.WriteString(`],"hasMore":`)
	b.WriteString(strconv.FormatBool(more))
	b.WriteString("}")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
	return nil
}

// replayPage is how many log events one store read returns during replay.
const replayPage = 1000

// v2SessionEvents replays the session's log after the cursor, then tails
// live durable events: it subscribes before reading the log and drops live
// events the replay already sent, so the seam has no gap and no duplicate.
func (s *Server) v2SessionEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	// Last-Event-ID wins: the SDK reconnects with its original URL (and its
	// original ?after=) plus the header naming the last event it got.
	cur := r.Header.Get("Last-Event-ID")
	if cur == "" {
		cur = r.URL.Query().Get("after")
	}
	after, err := cursorParam(cur, "after")
	if err != nil {
		return err
	}
	if _, err := s.m.GetSession(r.Context(), id); err != nil {
		return err
	}
	release, ok := s.streams.acquire(r)
	if !ok {
		return tooManyStreams
	}
	defer release()
	sub := s.m.Subscribe(subscriberQueue, func(e *opencode.Event) bool { return e.Durable && e.SessionID == id })
	sub.Track()
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	sent := after
	for {
		evs, err := s.m.Events(r.Context(), id, sent, replayPage)
		if err != nil {
			return nil // headers are out; the stream just ends
		}
		for _, e := range evs {
			if !sw.write(frameDurable(e)) {
				return nil
			}
			sent = e.Seq
		}
		if !sw.flush() {
			return nil
		}
		if len(evs) < replayPage {
			break
		}
	}
	s.pump(r, sw, sub, opencode.FrameDurable, frameDurable, func(e *opencode.Event) bool { return e.Seq <= sent })
	return nil
}

// frameNative is an /api/event frame: the v2 native payload {id, type,
// durable?, location?, data}, as OpenCode sends it.
func frameNative(e *opencode.Event) []byte {
	return e.Frame(opencode.FrameNative, func(e *opencode.Event) []byte {
		var b bytes.Buffer
		b.WriteString(`data: {"id":`)
		writeString(&b, e.ID)
		b.WriteString(`,"type":`)
		writeString(&b, e.Type)
		if e.Durable {
			writeDurableRef(&b, e)
		}
		if e.Directory != "" {
			b.WriteString(`,"location":{"directory":`)
			writeString(&b, e.Directory)
			b.WriteByte('}')
		}
		b.WriteString(`,"data":`)
		b.Write(e.Data)
		b.WriteString("}\n\n")
		return b.Bytes()
	})
}

func (s *Server) v2AllEvents(w http.ResponseWriter, r *http.Request) {
	release, ok := s.streams.acquire(r)
	if !ok {
		writeError(w, r, v2, s.log, tooManyStreams)
		return
	}
	defer release()
	sub := s.m.Subscribe(subscriberQueue, nil)
	sub.Track()
	defer sub.Close()
	sseHeaders(w)
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	if !sw.write(connectionFrame(opencode.FrameNative, opencode.EvServerConnected)) || !sw.flush() {
		return
	}
	s.pump(r, sw, sub, opencode.FrameNative, frameNative, nil)
}

// ---- inbox (v1 and v2 share the handlers; the family decides error shapes)

func inputView(in *opencode.Input) map[string]any {
	a := in.Admitted()
	return map[string]any{"id": in.ID, "sessionID": in.SessionID, "delivery": in.Delivery, "prompt": a.Prompt,
		"admittedSeq": in.AdmittedSeq, "timeCreated": in.TimeCreated, "parts": in.Parts}
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	ins, err := s.m.Inbox(r.Context(), id)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(ins))
	for i, in := range ins {
		out[i] = inputView(in)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
	return nil
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	mid, err := messageID(r)
	if err != nil {
		return err
	}
	ok, err := s.m.Revoke(detach(r.Context()), id, mid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"revoked": ok})
	return nil
}

type patchInboxBody struct {
	Delivery *opencode.Delivery `json:"delivery,omitempty"`
	Prompt   *promptInputV2     `json:"prompt,omitempty"`
}

func (s *Server) patchInbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	mid, err := messageID(r)
	if err != nil {
		return err
	}
	var b patchInboxBody
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if b.Delivery == nil && b.Prompt == nil {
		return badRequest("Payload", "", "Expected delivery and/or prompt")
	}
	if b.Delivery != nil && !b.Delivery.Valid() {
		return badRequest("Payload", "delivery", "Expected \"steer\" or \"queue\" at [\"delivery\"]")
	}
	var parts []opencode.Part
	if b.Prompt != nil {
		if err := validate.Struct(b.Prompt); err != nil {
			return validationError(err, "prompt.")
		}
		parts = decodeV2Prompt(b.Prompt)
	}
	in, err := s.m.Replace(detach(r.Context()), id, mid, b.Delivery, parts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": inputView(in)})
	return nil
}
