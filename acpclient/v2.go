package acpclient

import (
	"encoding/json"
	"errors"
	"slices"
)

// ACP v2 (schema/v2 2.0.0-alpha.3) and RFD #1261's session/inject, beside
// v1. The version is negotiated per connection: the client offers its
// latest, the agent answers it if it speaks it, else its own latest. A
// v1 agent reads the v1 fields of the same initialize and answers 1.

// ProtocolVersion2 is ACP v2.
const ProtocolVersion2 = 2

// v2 methods.
const (
	// MethodSessionResume replaces v1's session/load (no replay unless
	// replayFrom asks for one).
	MethodSessionResume = "session/resume"
	MethodSessionInject = "session/inject"
	MethodRevokeInject  = "session/revoke_inject"
)

// CodeInjectRefused is RFD #1261's refusal of an inject operation
// (data.reason: no_running_turn, already_delivered, ...).
const CodeInjectRefused = -32010

// Inject reasons (data.reason of a CodeInjectRefused).
const (
	ReasonNoRunningTurn    = "no_running_turn"
	ReasonAlreadyDelivered = "already_delivered"
)

// InitializeRequestV2 offers v2 and still carries v1's fields, so one
// request serves an agent of either version.
type InitializeRequestV2 struct {
	InitializeRequest
	Info         Implementation `json:"info"`
	Capabilities struct{}       `json:"capabilities"`
}

// InitializeResponseV2 is what this client reads of a v2 initialize result.
type InitializeResponseV2 struct {
	ProtocolVersion int `json:"protocolVersion"`
	Capabilities    struct {
		Session struct {
			Prompt *struct {
				// v2: an object (its options) when offered, absent or null when not.
				Image           json.RawMessage `json:"image"`
				EmbeddedContext json.RawMessage `json:"embeddedContext"`
			} `json:"prompt"`
			Inject *struct {
				Modes []string `json:"modes"`
			} `json:"inject"`
		} `json:"session"`
	} `json:"capabilities"`
	AuthMethods []AuthMethod `json:"authMethods,omitempty"`
}

func offered(v json.RawMessage) bool {
	return len(v) > 0 && string(v) != "null" && string(v) != "false"
}

// PromptCapabilities are the v2 prompt capabilities in v1's terms.
func (r *InitializeResponseV2) PromptCapabilities() PromptCapabilities {
	p := r.Capabilities.Session.Prompt
	if p == nil {
		return PromptCapabilities{}
	}
	return PromptCapabilities{Image: offered(p.Image), EmbeddedContext: offered(p.EmbeddedContext)}
}

// Steers reports whether the agent takes session/inject in mode steer.
func (r *InitializeResponseV2) Steers() bool {
	in := r.Capabilities.Session.Inject
	return in != nil && slices.Contains(in.Modes, "steer")
}

// ResumeSessionRequest is session/resume's params (no replayFrom: the
// client has its own history).
type ResumeSessionRequest struct {
	SessionID  string `json:"sessionId"`
	Cwd        string `json:"cwd"`
	MCPServers []any  `json:"mcpServers"`
}

// InjectRequest is session/inject's params; Meta carries our message ID.
type InjectRequest struct {
	SessionID string         `json:"sessionId"`
	Mode      string         `json:"mode"`
	Content   []ContentBlock `json:"content"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// InjectResponse names the message ID the inject's user_message will carry.
type InjectResponse struct {
	MessageID string `json:"messageId"`
}

// RevokeInjectRequest is session/revoke_inject's params.
type RevokeInjectRequest struct {
	SessionID string `json:"sessionId"`
	MessageID string `json:"messageId"`
}

// InjectReason is data.reason of an inject operation's refusal ("" for
// any other error).
func InjectReason(err error) string {
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeInjectRefused && re.Code != -32002 {
		return ""
	}
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(re.Data, &d)
	return d.Reason
}

// UpdateV2 is what a v2 update adds to v1's fields: state_update's state
// and stop reason, plan_update's entries, tool_call_content_chunk's one
// content item.
type UpdateV2 struct {
	State      string `json:"state"`
	StopReason string `json:"stopReason"`
	Plan       *struct {
		Entries []PlanEntry `json:"entries"`
	} `json:"plan"`
	ToolCallID string          `json:"toolCallId"`
	Content    json.RawMessage `json:"content"`
}

// V2 reads an update's v2 fields.
func (u SessionUpdate) V2() UpdateV2 {
	var v UpdateV2
	_ = json.Unmarshal(u.raw, &v)
	return v
}
