package routes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

func (s *Server) mountV1(r chi.Router) {
	r.Get("/global/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"healthy": true, "version": opencode.Version})
	})
	r.Get("/event", s.eventStream(opencode.FrameV1))
	r.Get("/global/event", s.eventStream(opencode.FrameGlobal))
	r.Get("/doc", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(s.cfg.OpenAPI)
	})

	r.Post("/session", s.h(v1, s.createSession))
	r.Get("/session", s.h(v1, s.listSessions))
	r.Get("/session/status", s.h(v1, s.sessionStatus))
	r.Route("/session/{sessionID}", func(r chi.Router) {
		r.Get("/", s.h(v1, s.getSession))
		r.Patch("/", s.h(v1, s.patchSession))
		r.Delete("/", s.h(v1, s.deleteSession))
		r.Get("/children", s.h(v1, s.children))
		r.Get("/message", s.h(v1, s.listMessages))
		r.Get("/message/{messageID}", s.h(v1, s.getMessage))
		r.Post("/message", s.h(v1, s.promptSync))
		r.Post("/prompt_async", s.h(v1, s.promptAsync))
		r.Post("/abort", s.h(v1, s.abort))
		r.Get("/todo", s.h(v1, s.todo))
		r.Get("/diff", s.h(v1, s.sessionDiff))
		r.Get("/inbox", s.h(v1, s.inbox))
		r.Delete("/inbox/{messageID}", s.h(v1, s.revoke))
		r.Patch("/inbox/{messageID}", s.h(v1, s.patchInbox))
		r.Post("/permissions/{permissionID}", s.h(v1, s.legacyPermissionReply))
	})
	r.Get("/permission", s.h(v1, s.listPermissions))
	r.Post("/permission/{requestID}/reply", s.h(v1, s.permissionReply))
	r.Get("/question", s.h(v1, s.listQuestions))
	r.Post("/question/{requestID}/reply", s.h(v1, s.questionReply))
	r.Post("/question/{requestID}/reject", s.h(v1, s.questionReply))
}

func (s *Server) listPermissions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.m.Permissions())
	return nil
}

type permissionReplyBody struct {
	Reply   string `json:"reply" validate:"required,oneof=once always reject"`
	Message string `json:"message,omitempty"`
}

func (s *Server) permissionReply(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "requestID")
	if err := identifier.Check(identifier.Permission, id); err != nil {
		return badRequest("Params", "requestID", "Invalid requestID: expected an ID starting with \"per_\"")
	}
	var b permissionReplyBody
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if err := validate.Struct(b); err != nil {
		return validationError(err, "")
	}
	if err := s.m.ReplyPermissionWith(detach(r.Context()), id, b.Reply, b.Message); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.m.Questions())
	return nil
}

type questionReplyBody struct {
	Answers *[][]string `json:"answers"`
}

// questionAnswers reads the answers of a question reply (none for a reject).
func questionAnswers(r *http.Request, reject bool) ([][]string, error) {
	if reject {
		return nil, nil
	}
	var b questionReplyBody
	if err := decodeBody(r, &b, false); err != nil {
		return nil, err
	}
	if b.Answers == nil {
		return nil, badRequest("Payload", "answers", "Missing key at [\"answers\"]")
	}
	return *b.Answers, nil
}

// questionReply answers (…/reply, {answers}) or dismisses (…/reject) a
// question the question tool put to the user.
func (s *Server) questionReply(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "requestID")
	if err := identifier.Check(identifier.Question, id); err != nil {
		return badRequest("Params", "requestID", "Invalid requestID: expected an ID starting with \"que_\"")
	}
	reject := strings.HasSuffix(r.URL.Path, "/reject")
	answers, err := questionAnswers(r, reject)
	if err != nil {
		return err
	}
	if err := s.m.ReplyQuestion(detach(r.Context()), id, answers, reject); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

type legacyPermissionBody struct {
	Response string `json:"response" validate:"required,oneof=once always reject"`
}

// legacyPermissionReply is the older POST /session/{id}/permissions/{permissionID}.
func (s *Server) legacyPermissionReply(w http.ResponseWriter, r *http.Request) error {
	if _, err := sessionID(r); err != nil {
		return err
	}
	id := chi.URLParam(r, "permissionID")
	if err := identifier.Check(identifier.Permission, id); err != nil {
		return badRequest("Params", "permissionID", "Invalid permissionID: expected an ID starting with \"per_\"")
	}
	var b legacyPermissionBody
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if err := validate.Struct(b); err != nil {
		return validationError(err, "")
	}
	if err := s.m.ReplyPermission(detach(r.Context()), id, b.Response); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// sessionID reads and checks the {sessionID} path parameter.
func sessionID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "sessionID")
	if err := identifier.Check(identifier.Session, id); err != nil {
		return "", badRequest("Params", "sessionID", "Invalid sessionID: expected an ID starting with \"ses_\"")
	}
	return id, nil
}

func messageID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "messageID")
	if err := identifier.Check(identifier.Message, id); err != nil {
		return "", badRequest("Params", "messageID", "Invalid messageID: expected an ID starting with \"msg_\"")
	}
	return id, nil
}

// sessionAndMessage are the {sessionID} and {messageID} of a route.
func sessionAndMessage(r *http.Request) (string, string, error) {
	id, err := sessionID(r)
	if err != nil {
		return "", "", err
	}
	mid, err := messageID(r)
	return id, mid, err
}

type createSessionBody struct {
	ParentID    string             `json:"parentID,omitempty"`
	Title       string             `json:"title,omitempty"`
	Agent       string             `json:"agent,omitempty"`
	Model       *opencode.ModelRef `json:"model,omitempty"`
	Metadata    json.RawMessage    `json:"metadata,omitempty"`
	Permission  json.RawMessage    `json:"permission,omitempty"`
	WorkspaceID string             `json:"workspaceID,omitempty"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var b createSessionBody
	if err := decodeBody(r, &b, true); err != nil {
		return err
	}
	if b.ParentID != "" {
		if err := checkID(identifier.Session, b.ParentID, "parentID"); err != nil {
			return err
		}
	}
	if b.Model != nil && (b.Model.ID == "" || b.Model.ProviderID == "") {
		return badRequest("Payload", "model", "model needs id and providerID")
	}
	if b.WorkspaceID != "" {
		if err := checkID(workspacePrefix, b.WorkspaceID, "workspaceID"); err != nil {
			return err
		}
	}
	var err error
	if b.Metadata, b.Permission, err = checkSessionFields(b.Metadata, b.Permission); err != nil {
		return err
	}
	sess, _, err := s.m.CreateSession(detach(r.Context()), opencode.SessionOptions{
		ID: s.ids.NewSession(), Minted: true, ParentID: b.ParentID, Title: b.Title, Agent: b.Agent, Model: b.Model,
		Directory: s.directory(r), Permission: b.Permission, Metadata: b.Metadata, WorkspaceID: b.WorkspaceID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// permissionRule is one rule of a session's permission list.
type permissionRule struct {
	Permission string `json:"permission" validate:"required"`
	Pattern    string `json:"pattern" validate:"required"`
	Action     string `json:"action" validate:"required,oneof=allow ask deny"`
}

// checkSessionFields validates a session's metadata (an object) and
// permission (a list of rules); null means absent.
func checkSessionFields(metadata, permission json.RawMessage) (json.RawMessage, json.RawMessage, error) {
	if isNull(metadata) {
		metadata = nil
	} else {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(metadata, &m); err != nil {
			return nil, nil, badRequest("Payload", "metadata", "Expected an object at [\"metadata\"]")
		}
	}
	if isNull(permission) {
		return metadata, nil, nil
	}
	var rules []json.RawMessage
	if err := json.Unmarshal(permission, &rules); err != nil {
		return nil, nil, badRequest("Payload", "permission", "Expected an array of rules at [\"permission\"]")
	}
	for i, raw := range rules {
		var rule permissionRule
		where := fmt.Sprintf("permission.%d.", i)
		if err := decodeStrict(raw, &rule, where); err != nil {
			return nil, nil, err
		}
		if err := validate.Struct(rule); err != nil {
			return nil, nil, validationError(err, where)
		}
	}
	return metadata, permission, nil
}

func isNull(b json.RawMessage) bool {
	return len(b) == 0 || string(bytes.TrimSpace(b)) == "null"
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var start int64
	if v := q.Get("start"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Query", "start", "Expected a non-negative integer at [\"start\"]")
		}
		start = n
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("Query", "limit", "Expected a non-negative integer at [\"limit\"]")
		}
		limit = n
	}
	roots := q.Get("roots") == "true"
	search := strings.ToLower(q.Get("search"))
	all, err := s.m.ListSessions(r.Context())
	if err != nil {
		return err
	}
	// As OpenCode: ?directory= lists that directory's sessions; otherwise
	// the sessions of the project the request addresses (its git work
	// tree; every directory outside git is one "global" project).
	exact := q.Get("directory") != ""
	dir := s.directory(r)
	project := s.projects.of(dir)
	out := make([]opencode.Session, 0, len(all))
	for _, ss := range all {
		if ss.Time.Updated < start || (roots && ss.ParentID != "") ||
			(search != "" && !strings.Contains(strings.ToLower(ss.Title), search)) {
			continue
		}
		if (exact && ss.Directory != dir) || (!exact && s.projects.of(ss.Directory) != project) {
			continue
		}
		out = append(out, ss)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sessionStatus(w http.ResponseWriter, r *http.Request) error {
	status, err := s.m.SessionStatus(r.Context())
	if err != nil {
		return err
	}
	out := map[string]any{}
	for id, st := range status {
		out[id] = map[string]any{"type": st}
		if attempt, msg, next, ok := s.m.StoreRetry(id); st == "retry" && ok {
			// OpenCode's retry status: the shape a client shows.
			out[id] = map[string]any{"type": "retry", "attempt": attempt, "message": msg, "next": next}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	sess, err := s.m.GetSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

type patchSessionBody struct {
	Title      *string         `json:"title,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	Permission json.RawMessage `json:"permission,omitempty"`
	Time       *struct {
		Archived *float64 `json:"archived,omitempty"`
	} `json:"time,omitempty"`
}

func (s *Server) patchSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b patchSessionBody
	if err := decodeBody(r, &b, true); err != nil {
		return err
	}
	if b.Metadata, b.Permission, err = checkSessionFields(b.Metadata, b.Permission); err != nil {
		return err
	}
	p := opencode.SessionPatch{Title: b.Title, Metadata: b.Metadata, Permission: b.Permission}
	if b.Time != nil {
		p.Archived = b.Time.Archived
	}
	sess, err := s.m.UpdateSession(detach(r.Context()), id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := s.m.DeleteSession(detach(r.Context()), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) children(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if _, err := s.m.GetSession(r.Context(), id); err != nil {
		return err
	}
	all, err := s.m.ListSessions(r.Context())
	if err != nil {
		return err
	}
	out := []opencode.Session{}
	for _, ss := range all {
		if ss.ParentID == id {
			out = append(out, ss)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("Query", "limit", "Expected a non-negative integer at [\"limit\"]")
		}
		limit = n
	}
	// The last limit messages (before a message, with ?before=), oldest
	// first: only that page is read.
	pq := opencode.PageQuery{Before: true, Limit: limit}
	if before := q.Get("before"); before != "" {
		pq.Anchor = before
	}
	msgs, err := s.m.MessagesPage(r.Context(), id, pq)
	var oe *opencode.Error
	if errors.As(err, &oe) && oe.Code == opencode.EInvalid {
		// A ?before= that is not in the session cuts nothing.
		pq.Anchor = ""
		msgs, err = s.m.MessagesPage(r.Context(), id, pq)
	}
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []opencode.MessageWithParts{}
	}
	writeJSON(w, http.StatusOK, msgs)
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) error {
	id, mid, err := sessionAndMessage(r)
	if err != nil {
		return err
	}
	mp, err := s.m.Message(r.Context(), id, mid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, mp)
	return nil
}

// promptBody is the v1 prompt (POST /session/{id}/message and prompt_async),
// plus our optional delivery.
type promptBody struct {
	MessageID string                 `json:"messageID,omitempty"`
	Model     *opencode.MessageModel `json:"model,omitempty"`
	Agent     string                 `json:"agent,omitempty"`
	NoReply   bool                   `json:"noReply,omitempty"`
	Tools     map[string]bool        `json:"tools,omitempty"`
	Format    json.RawMessage        `json:"format,omitempty"`
	System    string                 `json:"system,omitempty"`
	Variant   string                 `json:"variant,omitempty"`
	Parts     []json.RawMessage      `json:"parts"`
	Delivery  opencode.Delivery      `json:"delivery,omitempty"`
}

// decodePrompt turns a v1 prompt into an input: the message ID is the
// client's (prefix-checked) or minted here, once.
func (s *Server) decodePrompt(r *http.Request, sessionID string) (*opencode.Input, error) {
	var b promptBody
	if err := decodeBody(r, &b, false); err != nil {
		return nil, err
	}
	if b.Parts == nil {
		return nil, badRequest("Payload", "parts", "Missing key at [\"parts\"]")
	}
	if b.Model != nil && (b.Model.ProviderID == "" || b.Model.ModelID == "") {
		return nil, badRequest("Payload", "model", "model needs providerID and modelID")
	}
	if b.Model != nil && !s.m.HasModel(b.Model.ProviderID, b.Model.ModelID) {
		return nil, badRequest("Payload", "model", "Model not found: "+b.Model.ProviderID+"/"+b.Model.ModelID)
	}
	if b.Agent != "" && !s.knownAgent(b.Agent) {
		return nil, badRequest("Payload", "agent", "Agent not found: \""+b.Agent+"\"")
	}
	if b.Delivery != "" && !b.Delivery.Valid() {
		return nil, badRequest("Payload", "delivery", "Expected \"steer\" or \"queue\" at [\"delivery\"]")
	}
	if b.Delivery == "" {
		// As the real server: input sent while busy is injected at the next
		// step boundary; on an idle session a steer simply starts the turn.
		b.Delivery = opencode.Steer
	}
	id, minted, err := s.messageIDOr(b.MessageID, "messageID")
	if err != nil {
		return nil, err
	}
	parts, err := s.decodeParts(b.Parts)
	if err != nil {
		return nil, err
	}
	return &opencode.Input{ID: id, Minted: minted, SessionID: sessionID, Delivery: b.Delivery, Parts: parts,
		Agent: b.Agent, Model: b.Model, Variant: b.Variant, System: b.System, Tools: b.Tools, NoReply: b.NoReply}, nil
}

// flushWait bounds how long a blocking prompt waits for SSE writers to send
// the turn's events before it answers.
const flushWait = 2 * time.Second

func (s *Server) promptSync(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	in, err := s.decodePrompt(r, id)
	if err != nil {
		return err
	}
	if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
		return err
	}
	res, err := s.m.Wait(r.Context(), id, in.ID)
	if err != nil {
		return err
	}
	// opencode run --attach exits as soon as this answer arrives: make sure
	// every event of the turn has reached the SSE clients first.
	ctx, cancel := context.WithTimeout(r.Context(), flushWait)
	s.m.Flushed(ctx, res, id)
	cancel()
	writeJSON(w, http.StatusOK, res.Message)
	return nil
}

func (s *Server) promptAsync(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	in, err := s.decodePrompt(r, id)
	if err != nil {
		return err
	}
	if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := s.m.Abort(detach(r.Context()), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// sessionDiff lists the files the session (or one message's turn) changed.
func (s *Server) sessionDiff(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	mid := r.URL.Query().Get("messageID")
	if mid != "" {
		if err := checkID(identifier.Message, mid, "messageID"); err != nil {
			return err
		}
	}
	diff, err := s.m.SessionDiff(r.Context(), id, mid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, diff)
	return nil
}

// todo is the session's todo list (its latest todowrite call).
func (s *Server) todo(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	todos, err := s.m.Todos(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, todos)
	return nil
}
