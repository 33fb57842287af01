package opencode

// The v2 permission events of asks a client creates
// (POST /api/session/{id}/permission).
const (
	EvPermissionV2Asked   = "permission.v2.asked"
	EvPermissionV2Replied = "permission.v2.replied"
)

// PermissionV2Request is OpenCode's PermissionV2Request: a permission ask
// in the v2 shape (a tool's asks are listed so too). It is the payload of
// permission.v2.asked.
type PermissionV2Request struct {
	ID        string              `json:"id"`
	SessionID string              `json:"sessionID"`
	Action    string              `json:"action"`
	Resources []string            `json:"resources"`
	Save      []string            `json:"save,omitempty"`
	Metadata  map[string]any      `json:"metadata,omitempty"`
	Source    *PermissionV2Source `json:"source,omitempty"`
}

// PermissionV2Source is the tool call an ask comes from.
type PermissionV2Source struct {
	Type      string `json:"type"`
	MessageID string `json:"messageID"`
	CallID    string `json:"callID"`
}

// PermissionV2Replied is permission.v2.replied.
type PermissionV2Replied struct {
	SessionID string `json:"sessionID"`
	RequestID string `json:"requestID"`
	Reply     string `json:"reply"`
}

func (PermissionV2Request) EventType() string { return EvPermissionV2Asked }
func (PermissionV2Replied) EventType() string { return EvPermissionV2Replied }

// V2 is the request in the v2 shape.
func (p PermissionRequest) V2() PermissionV2Request {
	out := PermissionV2Request{ID: p.ID, SessionID: p.SessionID, Action: p.Permission, Resources: p.Patterns, Save: p.Always, Metadata: p.Metadata}
	if out.Resources == nil {
		out.Resources = []string{}
	}
	if p.Tool != nil {
		out.Source = &PermissionV2Source{Type: "tool", MessageID: p.Tool.MessageID, CallID: p.Tool.CallID}
		// A tool's ask carries no metadata in the v2 shape (OpenCode's v2
		// tools ask without it); the v1 shape has the file and the diff.
		out.Metadata = nil
	}
	return out
}
