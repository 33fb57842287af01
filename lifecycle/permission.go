package lifecycle

import (
	"context"
	"encoding/json"
	"github.com/opencode-server/opencode-server/agent"
	"sort"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// Rule is one permission rule (see agent.Rule).
type Rule = agent.Rule

// DefaultRules are OpenCode 1.18.33's defaults for the build agent: every
// tool runs without asking; only secrets (.env files) and paths outside the
// project ask. Our tools refuse paths outside the session directory
// outright, so external_directory never comes up; config and session rules
// (evaluated after these, last match wins) turn on "ask" where a user wants it.
var DefaultRules = []Rule{
	{Permission: "*", Pattern: "*", Action: "allow"},
	{Permission: "doom_loop", Pattern: "*", Action: "ask"},
	{Permission: "external_directory", Pattern: "*", Action: "ask"},
	{Permission: "question", Pattern: "*", Action: "deny"},
	{Permission: "read", Pattern: "*.env", Action: "ask"},
	{Permission: "read", Pattern: "*.env.*", Action: "ask"},
	{Permission: "read", Pattern: "*.env.example", Action: "allow"},
}

// evaluate returns the action for one permission and pattern.
func evaluate(rulesets [][]Rule, permission, pattern string) string {
	action := "ask"
	for _, rs := range rulesets {
		for _, r := range rs {
			if agent.Wildcard(r.Permission, permission) && agent.Wildcard(r.Pattern, pattern) {
				action = r.Action
			}
		}
	}
	return action
}

// ParseRules reads OpenCode's permission config (see agent.ParseRules).
func ParseRules(raw json.RawMessage) ([]Rule, error) { return agent.ParseRules(raw) }

// pendingAsk is an ask waiting for a reply; reply gets "once", "always"
// or "reject" exactly once.
type pendingAsk struct {
	req   opencode.PermissionRequest
	reply chan permReply
	// v2: a client's own ask (AskPermission), announced in the v2 shape.
	v2 bool
}

// Permissions lists the pending permission requests of all sessions.
func (m *Manager) Permissions() []opencode.PermissionRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]opencode.PermissionRequest, 0, len(m.asks)+len(m.remotePerms))
	for _, a := range m.asks {
		out = append(out, a.req)
	}
	for _, r := range m.remotePerms {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// permReply is the user's answer to an ask: once, always or reject, and
// for a reject the feedback the model is told (none: the turn stops after
// the step, as OpenCode's does).
type permReply struct {
	reply, message string
}

// ReplyPermission answers a pending request with once, always or reject.
func (m *Manager) ReplyPermission(ctx context.Context, requestID, reply string) error {
	return m.ReplyPermissionWith(ctx, requestID, reply, "")
}

// ReplyPermissionWith answers a pending request; a reject with a message
// hands the message to the model as the user's feedback (OpenCode's
// CorrectedError) and the turn goes on, a reject without one ends the turn
// after its step.
func (m *Manager) ReplyPermissionWith(ctx context.Context, requestID, reply, message string) error {
	if reply != "once" && reply != "always" && reply != "reject" {
		return opencode.Errorf(opencode.EInvalid, "reply must be once, always or reject")
	}
	m.mu.Lock()
	a := m.asks[requestID]
	m.mu.Unlock()
	if a == nil {
		return permissionNotFound(requestID)
	}
	var err error
	derr := m.do(ctx, a.req.SessionID, func(r *runner) { err = r.answerAsk(requestID, permReply{reply, message}) })
	if derr != nil {
		return derr
	}
	return err
}

// ask is called on the runner when a tool needs a decision. It returns the
// action now ("allow"/"deny"), or "ask" with a channel the reply arrives on.
func (r *runner) ask(call *toolRun, permission string, patterns []string, metadata map[string]any, always []string) (string, chan permReply) {
	rulesets := r.rulesets()
	action := "allow"
	for _, p := range patterns {
		switch evaluate(rulesets, permission, p) {
		case "deny":
			return "deny", nil
		case "ask":
			action = "ask"
		}
	}
	if action == "allow" {
		return "allow", nil
	}
	if metadata == nil {
		metadata = map[string]any{}
	}
	if always == nil {
		always = patterns
	}
	req := opencode.PermissionRequest{ID: r.m.ids.Ascending(identifier.Permission), SessionID: r.id, Permission: permission,
		Patterns: patterns, Metadata: metadata, Always: always,
		Tool: &opencode.PermissionTool{MessageID: call.messageID, CallID: call.callID}}
	a := &pendingAsk{req: req, reply: make(chan permReply, 1)}
	r.m.mu.Lock()
	r.m.asks[req.ID] = a
	r.m.mu.Unlock()
	r.publishLive(req)
	return "ask", a.reply
}

// answerAsk delivers a reply on the runner. "always" approves the patterns
// for the rest of the session.
func (r *runner) answerAsk(requestID string, pr permReply) error {
	r.m.mu.Lock()
	a := r.m.asks[requestID]
	delete(r.m.asks, requestID)
	r.m.mu.Unlock()
	if a == nil {
		return permissionNotFound(requestID)
	}
	reply := pr.reply
	if reply == "always" {
		for _, p := range a.req.Always {
			r.approved = append(r.approved, Rule{Permission: a.req.Permission, Pattern: p, Action: "allow"})
		}
	}
	a.reply <- pr
	if a.v2 {
		r.publishLive(opencode.PermissionV2Replied{SessionID: r.id, RequestID: requestID, Reply: reply})
		return nil
	}
	r.publishLive(opencode.PermissionReplied{SessionID: r.id, RequestID: requestID, Reply: reply})
	return nil
}

// rejectAsks rejects every pending ask of this session (abort, shutdown).
func (r *runner) rejectAsks() {
	r.m.mu.Lock()
	ids := sessionKeys(r.m.asks, r.id, func(a *pendingAsk) string { return a.req.SessionID })
	r.m.mu.Unlock()
	for _, id := range ids {
		_ = r.answerAsk(id, permReply{reply: "reject"})
	}
	r.rejectQuestions()
}

// sessionKeys are the keys of m whose value belongs to session, sorted
// (m.mu held).
func sessionKeys[V any](m map[string]V, session string, of func(V) string) []string {
	var ids []string
	for id, v := range m {
		if of(v) == session {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// permissionNotFound is the answer to a reply to no pending request
// (OpenCode's PermissionNotFoundError, on every route).
func permissionNotFound(requestID string) error {
	return &opencode.Error{Code: opencode.ENotFound, Resource: "permission", RequestID: requestID,
		Message: "Permission request not found: " + requestID}
}
