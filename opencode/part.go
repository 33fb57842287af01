package opencode

import "encoding/json"

// Part types.
const (
	PartText       = "text"
	PartReasoning  = "reasoning"
	PartTool       = "tool"
	PartStepStart  = "step-start"
	PartStepFinish = "step-finish"
	PartFile       = "file"
	PartAgent      = "agent"
	PartSubtask    = "subtask"
	PartPatch      = "patch"
	PartCompaction = "compaction"
)

// PartTime is the time span of a text or reasoning part.
type PartTime struct {
	Start int64  `json:"start"`
	End   *int64 `json:"end,omitempty"`
}

// ToolState is a tool part's state: pending, running, completed or error.
type ToolState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Raw      *string         `json:"raw,omitempty"`
	Title    string          `json:"title,omitempty"`
	Output   *string         `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Time     *ToolTime       `json:"time,omitempty"`
	// Attachments are the files a completed call returned (file parts).
	Attachments []Part `json:"attachments,omitempty"`
}

// ToolTime is a tool run's time span.
type ToolTime struct {
	Start int64  `json:"start"`
	End   *int64 `json:"end,omitempty"`
	// Compacted is when the output was pruned from what the model sees.
	Compacted *int64 `json:"compacted,omitempty"`
}

// AgentSource locates an @agent mention in the prompt text.
type AgentSource struct {
	Value string `json:"value"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// Part is a v1 part. Type decides which fields are encoded; every part
// carries the ID of the message it belongs to.
type Part struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`

	// text, reasoning
	Text      string          `json:"text"`
	Synthetic bool            `json:"synthetic,omitempty"`
	Ignored   bool            `json:"ignored,omitempty"`
	Time      *PartTime       `json:"time,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`

	// tool
	CallID string     `json:"callID,omitempty"`
	Tool   string     `json:"tool,omitempty"`
	State  *ToolState `json:"state,omitempty"`

	// step-start, step-finish
	Snapshot string  `json:"snapshot,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Cost     float64 `json:"cost"`
	Tokens   *Tokens `json:"tokens,omitempty"`

	// compaction: a summarize request (Auto: the server asked for it)
	Auto bool `json:"auto,omitempty"`

	// patch: the files a step changed, from snapshot Hash on
	Hash  string   `json:"hash,omitempty"`
	Files []string `json:"files,omitempty"`

	// file
	Mime     string          `json:"mime,omitempty"`
	Filename string          `json:"filename,omitempty"`
	URL      string          `json:"url,omitempty"`
	Source   json.RawMessage `json:"source,omitempty"`

	// agent, subtask
	Name        string        `json:"name,omitempty"`
	Prompt      string        `json:"prompt,omitempty"`
	Description string        `json:"description,omitempty"`
	Agent       string        `json:"agent,omitempty"`
	Model       *MessageModel `json:"model,omitempty"`
	Command     string        `json:"command,omitempty"`
}

type partHead struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`
}

// MarshalJSON encodes exactly the fields OpenCode's shape of the part's type has.
func (p Part) MarshalJSON() ([]byte, error) {
	h := partHead{p.ID, p.SessionID, p.MessageID, p.Type}
	switch p.Type {
	case PartText:
		return p.appendText(make([]byte, 0, len(p.Text)+len(p.Text)/16+256), h)
	case PartReasoning:
		t := p.Time
		if t == nil {
			t = &PartTime{}
		}
		return json.Marshal(struct {
			partHead
			Text     string          `json:"text"`
			Metadata json.RawMessage `json:"metadata,omitempty"`
			Time     *PartTime       `json:"time"`
		}{h, p.Text, p.Metadata, t})
	case PartTool:
		return json.Marshal(struct {
			partHead
			CallID   string          `json:"callID"`
			Tool     string          `json:"tool"`
			State    *ToolState      `json:"state"`
			Metadata json.RawMessage `json:"metadata,omitempty"`
		}{h, p.CallID, p.Tool, p.State, p.Metadata})
	case PartStepStart:
		return json.Marshal(struct {
			partHead
			Snapshot string `json:"snapshot,omitempty"`
		}{h, p.Snapshot})
	case PartStepFinish:
		tok := p.Tokens
		if tok == nil {
			tok = &Tokens{}
		}
		return json.Marshal(struct {
			partHead
			Reason   string  `json:"reason"`
			Snapshot string  `json:"snapshot,omitempty"`
			Cost     float64 `json:"cost"`
			Tokens   *Tokens `json:"tokens"`
		}{h, p.Reason, p.Snapshot, p.Cost, tok})
	case PartPatch:
		files := p.Files
		if files == nil {
			files = []string{}
		}
		return json.Marshal(struct {
			partHead
			Hash  string   `json:"hash"`
			Files []string `json:"files"`
		}{h, p.Hash, files})
	case PartCompaction:
		return json.Marshal(struct {
			partHead
			Auto bool `json:"auto"`
		}{h, p.Auto})
	case PartFile:
		return json.Marshal(struct {
			partHead
			Mime     string          `json:"mime"`
			Filename string          `json:"filename,omitempty"`
			URL      string          `json:"url"`
			Source   json.RawMessage `json:"source,omitempty"`
		}{h, p.Mime, p.Filename, p.URL, p.Source})
	case PartAgent:
		return json.Marshal(struct {
			partHead
			Name   string          `json:"name"`
			Source json.RawMessage `json:"source,omitempty"`
		}{h, p.Name, p.Source})
	case PartSubtask:
		return json.Marshal(struct {
			partHead
			Prompt      string        `json:"prompt"`
			Description string        `json:"description"`
			Agent       string        `json:"agent"`
			Model       *MessageModel `json:"model,omitempty"`
			Command     string        `json:"command,omitempty"`
		}{h, p.Prompt, p.Description, p.Agent, p.Model, p.Command})
	}
	return json.Marshal(h)
}

// UnmarshalJSON decodes any part shape (the flat struct covers them all).
func (p *Part) UnmarshalJSON(b []byte) error {
	type plain Part
	var v plain
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Part(v)
	return nil
}

// appendText appends a text part: the head, the text, then the rest. The
// text (a prompt may be megabytes) is written once, into dst, which the
// caller sizes for it, not through encoding/json's growing buffers, its
// final copy and the copy it makes of a MarshalJSON's output.
func (p Part) appendText(dst []byte, h partHead) ([]byte, error) {
	head, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	rest, err := json.Marshal(struct {
		Synthetic bool            `json:"synthetic,omitempty"`
		Ignored   bool            `json:"ignored,omitempty"`
		Time      *PartTime       `json:"time,omitempty"`
		Metadata  json.RawMessage `json:"metadata,omitempty"`
	}{p.Synthetic, p.Ignored, p.Time, p.Metadata})
	if err != nil {
		return nil, err
	}
	dst = append(append(dst, head[:len(head)-1]...), `,"text":`...)
	dst = appendJSONString(dst, p.Text)
	if len(rest) > 2 {
		return append(append(dst, ','), rest[1:]...), nil
	}
	return append(dst, '}'), nil
}

// AppendJSON appends p's JSON (MarshalJSON's bytes) to dst: a text part
// straight into dst, with no intermediate copy.
func (p Part) AppendJSON(dst []byte) ([]byte, error) {
	if p.Type == PartText {
		return p.appendText(dst, partHead{p.ID, p.SessionID, p.MessageID, p.Type})
	}
	b, err := p.MarshalJSON()
	return append(dst, b...), err
}
