package opencode

import (
	"encoding/json"
	"strings"
)

// InputState is where an admitted input is in its life.
type InputState string

// An admitted input is pending until it is delivered to the model or revoked.
const (
	InputPending   InputState = "pending"
	InputDelivered InputState = "delivered"
	InputRevoked   InputState = "revoked"
	// InputTombstone is an ID revoked before it was admitted (the revoke
	// overtook its prompt on another connection): it holds no input, and
	// the prompt is refused when it arrives. A session keeps a bounded
	// number of them (store.MaxTombstones).
	InputTombstone InputState = "tombstone"
)

// Input is one admitted user input. Its ID is the msg_ ID it was admitted
// under and becomes the ID of the user message it is delivered as.
type Input struct {
	ID        string     `json:"id"`
	SessionID string     `json:"sessionID"`
	Delivery  Delivery   `json:"delivery"`
	State     InputState `json:"state"`
	// Parts are the user message's parts, their prt_ IDs assigned at admission.
	Parts []Part `json:"parts"`
	// Options are the v1 prompt options that shape the user message.
	Agent string        `json:"agent,omitempty"`
	Model *MessageModel `json:"model,omitempty"`
	// Variant is the thinking variant the prompt picked (the model's
	// variants, GET /provider), "" for the model's defaults.
	Variant string          `json:"variant,omitempty"`
	System  string          `json:"system,omitempty"`
	Tools   map[string]bool `json:"tools,omitempty"`
	// ClientTools are tools the client runs itself (AG-UI's frontend
	// tools): offered to the model for the turn that delivers the input; a
	// call of one waits until the client sends its result.
	ClientTools []ClientTool `json:"clientTools,omitempty"`
	// NoReply stores the user message without running the model.
	NoReply bool `json:"noReply,omitempty"`
	// Shell is a command the user typed (`!cmd`): its turn runs it with
	// bash instead of calling the model.
	Shell string `json:"shell,omitempty"`
	// Compact asks for a compaction: its turn summarizes the conversation
	// so far, and later turns start from that summary.
	Compact bool `json:"compact,omitempty"`
	// Shown: its user message was stored and announced at admission (the
	// session was busy), as OpenCode shows a prompt the moment it is posted;
	// delivery then keeps that message, revoke removes it.
	Shown bool `json:"shown,omitempty"`
	// Fingerprint is the canonical content used for idempotent admission.
	Fingerprint string `json:"fingerprint"`
	TimeCreated int64  `json:"timeCreated"`
	AdmittedSeq int64  `json:"admittedSeq"`
	PromotedSeq int64  `json:"promotedSeq,omitempty"`
	// Answer is the message that answers a delivered input once its turn
	// has ended: the turn's last assistant message (the user message itself
	// for noReply). A blocking prompt retried later gets it.
	Answer string `json:"answer,omitempty"`
	// Order is the store's admission order (internal).
	Order int64 `json:"-"`
	// Minted: the server minted the ID at the REST boundary this request,
	// so no earlier admission, message or tombstone can hold it and the
	// admission skips those reads (the commit still checks).
	Minted bool `json:"-"`
}

// ClientTool is a tool a client offers with its input and runs itself:
// the server only passes the model's call to it and its result back.
type ClientTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the tool's JSON Schema (an object), nil for none.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Prompt is the v2 prompt shape.
type Prompt struct {
	Text   string           `json:"text"`
	Files  []PromptFile     `json:"files,omitempty"`
	Agents []PromptAgentRef `json:"agents,omitempty"`
}

// PromptFile is a v2 file attachment.
type PromptFile struct {
	URI         string          `json:"uri"`
	Mime        string          `json:"mime"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Source      json.RawMessage `json:"source,omitempty"`
}

// PromptAgentRef is a v2 agent attachment.
type PromptAgentRef struct {
	Name   string          `json:"name"`
	Source json.RawMessage `json:"source,omitempty"`
}

// Prompt derives the v2 prompt of the input from its parts: text parts joined
// by newlines, file and agent parts as attachments.
func (in *Input) Prompt() Prompt { return PromptOf(in.Parts) }

// PromptOf derives the v2 prompt shape of user parts.
func PromptOf(parts []Part) Prompt {
	var p Prompt
	var texts []string
	for _, pt := range parts {
		switch pt.Type {
		case PartText:
			texts = append(texts, pt.Text)
		case PartFile:
			p.Files = append(p.Files, PromptFile{URI: pt.URL, Mime: pt.Mime, Name: pt.Filename, Source: pt.Source})
		case PartAgent:
			p.Agents = append(p.Agents, PromptAgentRef{Name: pt.Name, Source: pt.Source})
		case PartSubtask:
			texts = append(texts, pt.Prompt)
		}
	}
	p.Text = strings.Join(texts, "\n")
	return p
}

// Admitted is the v2 SessionInputAdmitted shape.
type Admitted struct {
	AdmittedSeq int64    `json:"admittedSeq"`
	ID          string   `json:"id"`
	SessionID   string   `json:"sessionID"`
	Prompt      Prompt   `json:"prompt"`
	Delivery    Delivery `json:"delivery"`
	TimeCreated int64    `json:"timeCreated"`
	PromotedSeq *int64   `json:"promotedSeq,omitempty"`
}

// Admitted returns the v2 view of the input.
func (in *Input) Admitted() Admitted {
	a := Admitted{AdmittedSeq: in.AdmittedSeq, ID: in.ID, SessionID: in.SessionID,
		Prompt: in.Prompt(), Delivery: in.Delivery, TimeCreated: in.TimeCreated}
	if in.PromotedSeq > 0 {
		s := in.PromotedSeq
		a.PromotedSeq = &s
	}
	return a
}

// ShellNote is the text of a shell command's user message, as OpenCode
// stores it (a synthetic part: the command itself is the tool part).
const ShellNote = "The following tool was executed by the user"

// ShellInput is the input of a command the user typed (`!cmd`): queued, so
// it runs as its own turn (after a running one, where OpenCode refuses),
// with a synthetic user message and a bash call instead of a model call.
func ShellInput(sessionID, messageID, partID, command, agent string, model *MessageModel) *Input {
	return &Input{ID: messageID, SessionID: sessionID, Delivery: Queue, Shell: command,
		Agent: agent, Model: model, Parts: []Part{{ID: partID, Type: PartText,
			Text: ShellNote, Synthetic: true}}}
}

// CompactInput is a summarize request (`/compact`): queued, so it runs as
// its own turn once the session is idle, with the model that summarizes.
func CompactInput(sessionID, messageID, partID string, model *MessageModel, auto bool) *Input {
	return &Input{ID: messageID, SessionID: sessionID, Delivery: Queue, Compact: true, Model: model,
		Parts: []Part{{ID: partID, Type: PartCompaction, Auto: auto}}}
}
