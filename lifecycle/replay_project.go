package lifecycle

// The v2 projection of a replay: the session.next.* events of a replayed
// history made into the stored messages and parts, as this server stores
// the turns it runs itself (a user message per delivered prompt, an
// assistant message per step with its step-start, text, reasoning, tool
// and step-finish parts), so the v1 and v2 message routes show them. A text
// or reasoning part keeps its ID when the event's textID is a part ID (as
// ours are); other parts get an ID derived from the event and what the part
// is, the same on every replay. What the v2 events do not say (a user
// message's system prompt and tools, provider metadata) is not there.

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

func (p *replayPlan) project(i int, e opencode.SyncEvent, typ string, d syncData) error {
	decode := func(v any) error {
		if err := json.Unmarshal(e.Data, v); err != nil {
			return replayInvalid("Invalid "+e.Type+" data: "+err.Error(), "events", i, "data")
		}
		return nil
	}
	switch typ {
	case opencode.EvAgentSwitched:
		var ev opencode.AgentSwitched
		if err := decode(&ev); err != nil {
			return err
		}
		p.sess.Agent = ev.Agent
		p.touchSession(ev.Timestamp)
	case opencode.EvModelSwitched:
		var ev opencode.ModelSwitched
		if err := decode(&ev); err != nil {
			return err
		}
		m := ev.Model
		p.sess.Model = &m
		p.touchSession(ev.Timestamp)
	case opencode.EvSessionMoved:
		var ev opencode.SessionMoved
		if err := decode(&ev); err != nil {
			return err
		}
		p.sess.Directory, p.sess.Path = ev.Location.Directory, strings.TrimPrefix(ev.Location.Directory, "/")
		p.touchSession(ev.Timestamp)
	case opencode.EvPrompted:
		var ev opencode.Prompted
		if err := decode(&ev); err != nil {
			return err
		}
		return p.prompted(i, e, ev)
	case opencode.EvInboxDelivered:
		var ev opencode.InboxDelivered
		if err := decode(&ev); err != nil {
			return err
		}
		// Our delivery: the user message's time is when it was delivered.
		if pm := p.msgs[ev.MessageID]; pm != nil && pm.projected && pm.mp.Info.Role == opencode.User {
			pm.mp.Info.Time.Created = ev.Timestamp
		}
	case opencode.EvStepStarted:
		var ev opencode.StepStarted
		if err := decode(&ev); err != nil {
			return err
		}
		return p.stepStarted(i, e, ev)
	case opencode.EvStepEnded:
		var ev opencode.StepEnded
		if err := decode(&ev); err != nil {
			return err
		}
		pm, err := p.step(i, ev.AssistantMessageID)
		if pm == nil || err != nil {
			return err
		}
		info := &pm.mp.Info
		tk := ev.Tokens
		total := tk.Input + tk.Cache.Read + tk.Cache.Write + tk.Output + tk.Reasoning
		tk.Total = &total
		at := ev.Timestamp
		info.Finish, info.Cost, info.Tokens, info.Time.Completed = ev.Finish, ev.Cost, tk, &at
		fin := opencode.Part{ID: partID(e, 0, info.ID, "step-finish"), SessionID: p.id, MessageID: info.ID,
			Type: opencode.PartStepFinish, Reason: ev.Finish, Cost: ev.Cost, Tokens: &tk}
		if ev.StepSnapshot != nil {
			fin.Snapshot = ev.StepSnapshot.Snapshot
		}
		pm.putPart(fin)
		if ev.StepSnapshot != nil && len(ev.StepSnapshot.Files) > 0 {
			// The files the step changed, restorable from the snapshot it
			// started at (OpenCode's patch part).
			patch := opencode.Part{ID: partID(e, 1, info.ID, "patch"), SessionID: p.id, MessageID: info.ID, Type: opencode.PartPatch}
			for _, pt := range pm.mp.Parts {
				if pt.Type == opencode.PartStepStart {
					patch.Hash = pt.Snapshot
				}
			}
			for _, f := range ev.StepSnapshot.Files {
				patch.Files = append(patch.Files, filepath.Join(p.sess.Directory, f))
			}
			pm.putPart(patch)
		}
	case opencode.EvStepFailed:
		var ev opencode.StepFailed
		if err := decode(&ev); err != nil {
			return err
		}
		pm, err := p.step(i, ev.AssistantMessageID)
		if pm == nil || err != nil {
			return err
		}
		at := ev.Timestamp
		pm.mp.Info.Time.Completed = &at
		if ev.Error.Type != "context_overflow" {
			// A context overflow is the session's (it compacts), not the
			// message's: as this server stores its own.
			pm.mp.Info.Error = &opencode.NamedError{Name: "APIError",
				Data: map[string]any{"message": ev.Error.Message, "isRetryable": false}}
		}
	case opencode.EvTextStarted, opencode.EvTextEnded, opencode.EvReasoningStarted, opencode.EvReasoningEnded:
		var ev struct {
			opencode.StepHeader
			TextID      string `json:"textID"`
			ReasoningID string `json:"reasoningID"`
			Text        string `json:"text"`
		}
		if err := decode(&ev); err != nil {
			return err
		}
		pm, err := p.step(i, ev.AssistantMessageID)
		if pm == nil || err != nil {
			return err
		}
		kind, key := opencode.PartText, ev.TextID
		if typ == opencode.EvReasoningStarted || typ == opencode.EvReasoningEnded {
			kind, key = opencode.PartReasoning, ev.ReasoningID
		}
		id := key
		if identifier.Check(identifier.Part, key) != nil {
			id = partID(e, 0, pm.mp.Info.ID, kind, key) // OpenCode's "text-0": not a part ID
		}
		part := opencode.Part{ID: id, SessionID: p.id, MessageID: pm.mp.Info.ID, Type: kind, Time: &opencode.PartTime{Start: ev.Timestamp}}
		if old := pm.find(func(pt opencode.Part) bool { return pt.Type == kind && samePart(pt.ID, id) }); old != nil {
			part = *old
		}
		if typ == opencode.EvTextEnded || typ == opencode.EvReasoningEnded {
			at := ev.Timestamp
			part.Text = ev.Text
			part.Time = &opencode.PartTime{Start: ev.Timestamp, End: &at}
			if old := pm.find(func(pt opencode.Part) bool { return pt.ID == part.ID }); old != nil && old.Time != nil {
				part.Time.Start = old.Time.Start
			}
		}
		pm.putPart(part)
	case opencode.EvToolInputStarted, opencode.EvToolInputEnded, opencode.EvToolCalled, opencode.EvToolSuccess, opencode.EvToolFailed:
		var ev struct {
			opencode.StepHeader
			CallID     string                 `json:"callID"`
			Name       string                 `json:"name"`
			Text       string                 `json:"text"`
			Tool       string                 `json:"tool"`
			Input      json.RawMessage        `json:"input"`
			Structured json.RawMessage        `json:"structured"`
			Content    []opencode.ToolContent `json:"content"`
			Error      opencode.EventError    `json:"error"`
		}
		if err := decode(&ev); err != nil {
			return err
		}
		pm, err := p.step(i, ev.AssistantMessageID)
		if pm == nil || err != nil {
			return err
		}
		part := opencode.Part{ID: partID(e, 0, pm.mp.Info.ID, "tool", ev.CallID), SessionID: p.id, MessageID: pm.mp.Info.ID,
			Type: opencode.PartTool, CallID: ev.CallID, Tool: ev.Name,
			State: &opencode.ToolState{Status: "pending", Input: json.RawMessage("{}"), Raw: new(string)}}
		if old := pm.find(func(pt opencode.Part) bool { return pt.Type == opencode.PartTool && pt.CallID == ev.CallID }); old != nil {
			state := part.State
			part = *old
			if old.State != nil {
				st := *old.State
				state = &st
			}
			part.State = state
		}
		st := part.State
		switch typ {
		case opencode.EvToolInputEnded:
			if st.Status == "pending" {
				raw := ev.Text
				st.Raw = &raw // the arguments as the model sent them
			}
		case opencode.EvToolCalled:
			part.Tool = ev.Tool
			st.Status, st.Input, st.Raw, st.Time = "running", ev.Input, nil, &opencode.ToolTime{Start: ev.Timestamp}
		case opencode.EvToolSuccess, opencode.EvToolFailed:
			at := ev.Timestamp
			if st.Time == nil {
				st.Time = &opencode.ToolTime{Start: at}
			}
			st.Time.End, st.Raw = &at, nil
			if typ == opencode.EvToolSuccess {
				out := ""
				for _, c := range ev.Content {
					if c.Type == "text" {
						out = c.Text
						break
					}
				}
				// The event has no title (which a completed call must
				// have): the tool's name.
				st.Status, st.Output, st.Metadata = "completed", &out, ev.Structured
				if st.Title == "" {
					st.Title = part.Tool
				}
				if len(st.Metadata) == 0 || isNull(st.Metadata) {
					st.Metadata = json.RawMessage("{}")
				}
			} else {
				st.Status, st.Error = "error", ev.Error.Message
			}
		}
		pm.putPart(part)
	}
	return nil
}

// touchSession moves the session's update time to at, never back (a
// history of ours starts with the session as it is now).
func (p *replayPlan) touchSession(at int64) {
	p.sessSet = true
	p.sess.Time.Updated = max(p.sess.Time.Updated, at)
}

// prompted is a delivered prompt: its user message.
func (p *replayPlan) prompted(i int, e opencode.SyncEvent, ev opencode.Prompted) error {
	id := ev.MessageID
	p.lastUser = id
	if p.v1[id] {
		return nil
	}
	pm, err := p.message(id, i)
	if err != nil || pm.mp.Info.ID != "" {
		return err // the session has it (a prompt shown when it was posted)
	}
	pm.projected, pm.write = true, true
	pm.mp.Info = opencode.Message{ID: id, SessionID: p.id, Role: opencode.User, Time: opencode.MessageTime{Created: ev.Timestamp}}
	pr := ev.Prompt
	n := 0
	if pr.Text != "" || len(pr.Files)+len(pr.Agents) == 0 {
		pm.putPart(opencode.Part{ID: partID(e, n, id, "text"), SessionID: p.id, MessageID: id, Type: opencode.PartText, Text: pr.Text})
		n++
	}
	for j, f := range pr.Files {
		pm.putPart(opencode.Part{ID: partID(e, n, id, "file", strconv.Itoa(j)), SessionID: p.id, MessageID: id,
			Type: opencode.PartFile, Mime: f.Mime, URL: f.URI, Filename: f.Name, Source: f.Source})
		n++
	}
	for j, a := range pr.Agents {
		pm.putPart(opencode.Part{ID: partID(e, n, id, "agent", strconv.Itoa(j)), SessionID: p.id, MessageID: id,
			Type: opencode.PartAgent, Name: a.Name, Source: a.Source})
		n++
	}
	p.unset = append(p.unset, pm)
	return nil
}

// stepStarted is a step's assistant message and its step-start part.
func (p *replayPlan) stepStarted(i int, e opencode.SyncEvent, ev opencode.StepStarted) error {
	id := ev.AssistantMessageID
	if p.v1[id] {
		return nil
	}
	pm, err := p.message(id, i)
	if err != nil {
		return err
	}
	if pm.mp.Info.ID == "" {
		parent, err := p.parent()
		if err != nil {
			return err
		}
		pm.projected = true
		pm.mp.Info = opencode.Message{ID: id, SessionID: p.id, Role: opencode.Assistant, Time: opencode.MessageTime{Created: ev.Timestamp},
			ParentID: parent, ModelID: ev.Model.ID, ProviderID: ev.Model.ProviderID, Mode: ev.Agent, Agent: ev.Agent,
			Path: opencode.MessagePath{Cwd: p.sess.Directory, Root: p.sess.Directory}}
	}
	if !pm.projected {
		return nil
	}
	pm.write = true
	pm.putPart(opencode.Part{ID: partID(e, 0, id, "step-start"), SessionID: p.id, MessageID: id, Type: opencode.PartStepStart, Snapshot: ev.Snapshot})
	// The prompts this step answers ran with its agent and model.
	for _, u := range p.unset {
		u.mp.Info.Agent = ev.Agent
		u.mp.Info.Model = &opencode.MessageModel{ProviderID: ev.Model.ProviderID, ModelID: ev.Model.ID, Variant: ev.Model.Variant}
	}
	p.unset = nil
	return nil
}

// step is the projected assistant message of a step's event: nil when the
// event is not projected (a v1 snapshot writes the message, or the step's
// start is in neither the replay nor the store).
func (p *replayPlan) step(i int, id string) (*planMsg, error) {
	if p.v1[id] {
		return nil, nil
	}
	pm, err := p.message(id, i)
	if err != nil || pm.mp.Info.ID == "" || pm.mp.Info.Role != opencode.Assistant || pm.removed {
		return nil, err
	}
	pm.projected, pm.write = true, true
	return pm, nil
}

// parent is the user message a new step answers: the latest prompt of the
// replay, else the session's latest user message.
func (p *replayPlan) parent() (string, error) {
	if p.lastUser != "" || p.latest < 0 {
		return p.lastUser, nil
	}
	msgs, err := p.m.store.MessagesPage(p.ctx, p.id, opencode.PageQuery{Desc: true, Limit: 50})
	if err != nil {
		return "", mapStoreErr(err, p.id)
	}
	for _, mp := range msgs {
		if mp.Info.Role == opencode.User {
			p.lastUser = mp.Info.ID
			break
		}
	}
	return p.lastUser, nil
}

func (pm *planMsg) find(match func(opencode.Part) bool) *opencode.Part {
	for j := range pm.mp.Parts {
		if match(pm.mp.Parts[j]) {
			return &pm.mp.Parts[j]
		}
	}
	return nil
}

// samePart reports whether a stored part is the one with derived ID id:
// the same ID, or (made by an earlier replay from another event) the same
// tail.
func samePart(stored, id string) bool {
	if stored == id {
		return true
	}
	const tail = 14
	return len(stored) > tail && len(id) > tail && strings.HasPrefix(id, string(identifier.Part)+"_") &&
		stored[len(stored)-tail:] == id[len(id)-tail:]
}

// finishUsers gives the prompts no step of the replay answered the
// session's agent and model.
func (p *replayPlan) finishUsers() {
	for _, u := range p.unset {
		u.mp.Info.Agent = p.sess.Agent
		if u.mp.Info.Agent == "" {
			u.mp.Info.Agent = "build"
		}
		if m := p.sess.Model; m != nil {
			u.mp.Info.Model = &opencode.MessageModel{ProviderID: m.ProviderID, ModelID: m.ID, Variant: m.Variant}
		}
	}
	p.unset = nil
}
