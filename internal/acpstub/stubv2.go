package acpstub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/opencode-server/opencode-server/acpclient"
)

// The stub as an ACP v2 agent (V2Env=1 and a client offering v2):
// session/prompt answers {} and runs the script, whose end is a
// state_update idle with its stop reason; session/resume continues a
// session without a replay; session/inject mode steer into a waiting
// Steered prompt is accepted (under an ID of the stub's), and delivered
// at once (a user_message with that ID, then the prompt says "after: "
// and the steer's text), except Undelivered and Tardy, which it accepts
// without delivering and ends the prompt (" ended"); a revoke then
// succeeds for Undelivered and answers already_delivered for Tardy. Hold
// is accepted at once and delivered once ReleaseFile exists. Any
// steer when no Steered prompt waits, and Later, are no_running_turn.
const (
	// V2Offered is V2Env's value for a stub that speaks v1 and v2.
	V2Offered   = "offered"
	Undelivered = "undelivered"
	Tardy       = "tardy"
)

// StrictEnv=1 makes the stub a strict v1 agent: an initialize with
// fields v1 does not have (v2's info and capabilities) is invalid params.
const StrictEnv = "OPENCODE_SERVER_ACP_STUB_STRICT"

// strictRefusal is the strict stub's refusal of an initialize it does not
// know all of, nil when it takes it.
func strictRefusal(params json.RawMessage) error {
	var req map[string]json.RawMessage
	if os.Getenv(StrictEnv) != "1" || json.Unmarshal(params, &req) != nil {
		return nil
	}
	for k := range req {
		switch k {
		case "protocolVersion", "clientCapabilities", "clientInfo", "_meta":
		default:
			return &acpclient.RPCError{Code: acpclient.CodeInvalidParams, Message: "unknown field " + k}
		}
	}
	return nil
}

// initializeV2 answers initialize as a v2 agent when V2Env is "1" (it
// speaks only v2: it answers 2 whatever the client offers, as the
// negotiation has an agent answer its latest version when it does not
// speak the one offered; the client's v2 info must be there) or "offered"
// (it speaks both and answers 2 when the client offers it).
func (a *stub) initializeV2(params json.RawMessage) (any, bool) {
	var req struct {
		ProtocolVersion int `json:"protocolVersion"`
		Info            *struct {
			Name string `json:"name"`
		} `json:"info"`
	}
	mode := os.Getenv(V2Env)
	if json.Unmarshal(params, &req) != nil || mode != "1" && (mode != V2Offered || req.ProtocolVersion < 2) {
		return nil, false
	}
	if req.Info == nil || req.Info.Name == "" {
		return nil, false // not a request a v2 agent can read: answered as v1 (the test sees it)
	}
	a.v2.Store(true)
	return map[string]any{"protocolVersion": 2, "info": map[string]any{"name": "acpstub", "version": "1"},
		"capabilities": map[string]any{"session": map[string]any{
			"inject": map[string]any{"modes": []string{"queue", "steer"}, "steer_in_stream": []string{"finish"},
				"pending": map[string]any{"replace": false}}}},
		"authMethods": []any{}}, true
}

// runV2 runs a v2 prompt's script; its end is a state_update idle.
func (a *stub) runV2(script string) {
	res, err := a.run(context.Background(), script)
	stop := acpclient.StopEndTurn
	if m, ok := res.(map[string]any); ok && err == nil {
		stop, _ = m["stopReason"].(string)
	}
	a.update(map[string]any{"sessionUpdate": "state_update", "state": "idle", "stopReason": stop})
	select {
	case a.ended <- struct{}{}:
	default:
	}
}

func injectRefused(reason, msg string) error {
	data, _ := json.Marshal(map[string]any{"reason": reason})
	return &acpclient.RPCError{Code: acpclient.CodeInjectRefused, Message: msg, Data: data}
}

// inject answers session/inject (see above).
func (a *stub) inject(params json.RawMessage) (any, error) {
	var req struct {
		acpclient.InjectRequest
		Meta struct {
			MessageID string `json:"messageId"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, err
	}
	s := Steer{Method: acpclient.MethodSessionInject, MessageID: req.Meta.MessageID, IdleBehavior: req.Mode}
	for _, b := range req.Content {
		s.Texts = append(s.Texts, b.Text)
	}
	text := strings.Join(s.Texts, " ")
	defer func() {
		b, _ := json.Marshal(s)
		appendLine(SteersFile, string(b))
	}()
	if req.Mode != "steer" || !a.waiting.CompareAndSwap(true, false) {
		s.Outcome = acpclient.ReasonNoRunningTurn
		return nil, injectRefused(s.Outcome, "no running turn")
	}
	if text == Later {
		a.steered <- "" // the work ends: too late for it
		s.Outcome = acpclient.ReasonNoRunningTurn
		return nil, injectRefused(s.Outcome, "no running turn")
	}
	a.mu.Lock()
	s.AgentID = fmt.Sprint("inj-", len(a.injects)+1)
	a.injects[s.AgentID] = text
	a.mu.Unlock()
	s.Outcome = "accepted"
	deliver := func() {
		a.update(map[string]any{"sessionUpdate": "user_message", "messageId": s.AgentID,
			"content": []any{map[string]any{"type": "text", "text": text}}})
		a.steered <- text
	}
	switch text {
	case Undelivered, Tardy:
		a.steered <- ""
	case Hold:
		go func() {
			waitFile(ReleaseFile)
			deliver()
		}()
	default:
		deliver()
	}
	return map[string]any{"messageId": s.AgentID}, nil
}

// revokeInject answers session/revoke_inject: Tardy was delivered, the
// rest are taken back.
func (a *stub) revokeInject(params json.RawMessage) (any, error) {
	var req acpclient.RevokeInjectRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, err
	}
	a.mu.Lock()
	text, ok := a.injects[req.MessageID]
	a.mu.Unlock()
	s := Steer{Method: acpclient.MethodRevokeInject, AgentID: req.MessageID, Texts: []string{text}, Outcome: "revoked"}
	defer func() {
		b, _ := json.Marshal(s)
		appendLine(SteersFile, string(b))
	}()
	switch {
	case !ok:
		s.Outcome = "unknown_message_id"
		data, _ := json.Marshal(map[string]any{"reason": s.Outcome})
		return nil, &acpclient.RPCError{Code: -32002, Message: "unknown message ID", Data: data}
	case text == Tardy:
		s.Outcome = acpclient.ReasonAlreadyDelivered
		return nil, injectRefused(s.Outcome, "already delivered")
	}
	return map[string]any{}, nil
}
