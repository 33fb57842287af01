package acpclient

import "encoding/json"

// Steering: `_session/steering`, the extension claude-agent-acp and our
// own ACP agent speak to add a user message to a running turn.

// MethodSessionSteering is the steering request.
const MethodSessionSteering = "_session/steering"

// Steering outcomes.
const (
	SteerInjected       = "injected"
	SteerPromptRequired = "promptRequired"
	SteerStartedNewTurn = "startedNewTurn"
)

// SteeringRequest is `_session/steering`'s params: idleBehavior
// "promptRequired" asks an idle agent to start nothing.
type SteeringRequest struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
	Meta      SteeringMeta   `json:"_meta"`
}

// SteeringMeta carries the idle behaviour and our message ID.
type SteeringMeta struct {
	Steering  SteeringOptions `json:"steering"`
	MessageID string          `json:"messageId,omitempty"`
}

// SteeringOptions is _meta.steering of a steering request.
type SteeringOptions struct {
	IdleBehavior string `json:"idleBehavior"`
}

// SteeringResponse is `_session/steering`'s result.
type SteeringResponse struct {
	Outcome string `json:"outcome"`
}

// SupportsSteering reports whether an initialize result advertises
// `_meta.steering.supported`: in agentCapabilities (claude-agent-acp) or
// beside it (our own agent).
func SupportsSteering(result json.RawMessage) bool {
	type steering struct {
		Meta struct {
			Steering struct {
				Supported bool `json:"supported"`
			} `json:"steering"`
		} `json:"_meta"`
	}
	var r struct {
		steering
		AgentCapabilities steering `json:"agentCapabilities"`
	}
	if json.Unmarshal(result, &r) != nil {
		return false
	}
	return r.Meta.Steering.Supported || r.AgentCapabilities.Meta.Steering.Supported
}
