package lifecycle

import (
	"context"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// AskPermission is a client's own permission check (v2
// POST /api/session/{id}/permission): the session's rules (those of
// agentName, or of the session's agent) decide allow or deny; "ask" puts a
// pending request up, listed and answered as a tool's ask is, announced
// with permission.v2.asked. No tool waits on it: its reply is only
// published (permission.v2.replied).
func (m *Manager) AskPermission(ctx context.Context, in opencode.PermissionV2Request, agentName string) (id, effect string, err error) {
	derr := m.do(ctx, in.SessionID, func(r *runner) { id, effect, err = r.askV2(in, agentName) })
	if derr != nil {
		return "", "", derr
	}
	return id, effect, err
}

func (r *runner) askV2(in opencode.PermissionV2Request, agentName string) (string, string, error) {
	if agentName == "" {
		agentName = r.sess.Agent
	}
	rulesets := r.rulesets()
	if a, ok := r.m.agent(agentName); ok {
		rulesets[1] = a.Rules // the agent's rules, as a turn of it would have them
	}
	effect := "allow"
	for _, p := range in.Resources {
		switch evaluate(rulesets, in.Action, p) {
		case "deny":
			effect = "deny"
		case "ask":
			if effect == "allow" {
				effect = "ask"
			}
		}
	}
	id := in.ID
	if id == "" {
		id = r.m.ids.Ascending(identifier.Permission)
	}
	if effect != "ask" {
		return id, effect, nil
	}
	req := opencode.PermissionRequest{ID: id, SessionID: r.id, Permission: in.Action, Patterns: in.Resources,
		Metadata: in.Metadata, Always: in.Save}
	// The v1 listing has them as objects and arrays, never null.
	if req.Metadata == nil {
		req.Metadata = map[string]any{}
	}
	if req.Always == nil {
		req.Always = []string{}
	}
	if in.Source != nil {
		req.Tool = &opencode.PermissionTool{MessageID: in.Source.MessageID, CallID: in.Source.CallID}
	}
	r.m.mu.Lock()
	if _, taken := r.m.asks[id]; taken {
		r.m.mu.Unlock()
		return "", "", &opencode.Error{Code: opencode.EConflict, SessionID: r.id, Resource: id,
			Message: "Permission request " + id + " is already pending"}
	}
	r.m.asks[id] = &pendingAsk{req: req, reply: make(chan permReply, 1), v2: true}
	r.m.mu.Unlock()
	r.publishLive(req.V2())
	return id, effect, nil
}
