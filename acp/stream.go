package acp

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// Updates come from the session's v2 events: the durable log (what
// session/load replays, in seq order) and the live deltas between its
// entries. A connection follows a session from the moment it creates,
// loads, resumes or prompts it.

// wanted is the events a followed session's stream looks at.
func wanted(e *opencode.Event) bool {
	if e.Durable || strings.HasPrefix(e.Type, "session.next.") {
		return true
	}
	switch e.Type {
	case opencode.EvTodoUpdated, opencode.EvSessionUpdated, opencode.EvPermissionAsked, opencode.EvPermissionReply,
		opencode.EvSessionStatus, opencode.EvPartUpdated:
		return true
	}
	return false
}

// attach follows a session on this connection (once); with replay its log
// is sent as updates first.
func (a *Agent) attach(ctx context.Context, id string, replay bool) (*attached, error) {
	a.mu.Lock()
	at := a.sessions[id]
	a.mu.Unlock()
	if at != nil && !replay {
		return at, nil
	}
	if at != nil {
		a.detach(id) // session/load again: a fresh replay
	}
	s, err := a.core.GetSession(ctx, id)
	if err != nil {
		return nil, coreError(err)
	}
	// Subscribed before the log is read: nothing falls between the two.
	sub := a.subscribe(id)
	at = &attached{id: id, sub: sub, done: make(chan struct{}), quit: make(chan struct{}), asks: map[string]context.CancelFunc{}}
	a.mu.Lock()
	if prev := a.sessions[id]; prev != nil {
		a.mu.Unlock()
		sub.Close()
		return prev, nil
	}
	a.sessions[id] = at
	a.mu.Unlock()
	mp := newMapper(s.Title)
	mp.size = a.contextSize(s)
	if !replay {
		mp.cost = s.Cost // the replay sums the log's steps instead
	}
	var sent int64
	if replay {
		for after := int64(0); ; {
			evs, err := a.core.Events(ctx, id, after, 500)
			if err != nil {
				close(at.done) // no stream runs
				a.detach(id)
				return nil, coreError(err)
			}
			for _, e := range evs {
				for _, u := range mp.updates(e, true) {
					_ = a.update(id, u)
				}
				after = e.Seq
			}
			if len(evs) < 500 {
				break
			}
		}
		sent = mp.lastSeq
	}
	go a.pump(at, mp, sent)
	return at, nil
}

// subscribe is a followed session's subscription.
func (a *Agent) subscribe(id string) *eventbus.Subscription {
	sub := a.core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == id && wanted(e) })
	sub.Track() // a prompt's reply waits until its turn's updates are written (Flushed)
	return sub
}

// pump streams a followed session's live updates until it is detached.
// sent is the seq of the last log event mapped. A subscription cut off
// (the client fell behind, or Bus.Reset when events may have been missed)
// is resumed: the log fills the gap, so the client's updates go on with
// nothing lost and nothing twice.
func (a *Agent) pump(at *attached, mp *mapper, sent int64) {
	defer close(at.done)
	at.mu.Lock()
	sub := at.sub
	at.mu.Unlock()
	for {
		for e := range sub.C {
			if e.Durable {
				if e.Seq <= sent {
					sub.Ack(e.Pos)
					continue // mapped already
				}
				sent = e.Seq
			}
			a.deliver(at, mp, e)
			sub.Ack(e.Pos)
		}
		if !sub.Dropped() {
			return // detached
		}
		a.log.Warn("acp: session updates cut off; resuming from the log", "session", at.id, "after", sent)
		if sub = a.resume(at, mp, &sent); sub == nil {
			return
		}
	}
}

// deliver writes one event's updates (and asks the client a permission).
func (a *Agent) deliver(at *attached, mp *mapper, e *opencode.Event) {
	at.gate.Lock()
	for _, u := range mp.updates(e, false) {
		switch u["state"] {
		case "idle":
			if u["stopReason"] == "end_turn" && at.cancelAsked.Load() {
				u["stopReason"] = "cancelled" // cancelled between two steps
			}
			at.cancelAsked.Store(false)
		case "running":
			if e.Type == opencode.EvPrompted {
				at.cancelAsked.Store(false) // new work: an earlier cancel was for older work
			}
		}
		_ = a.update(at.id, u)
	}
	at.gate.Unlock()
	switch e.Type {
	case opencode.EvPermissionAsked:
		a.askPermission(at, e)
	case opencode.EvPermissionReply:
		var p struct {
			RequestID string `json:"requestID"`
		}
		if json.Unmarshal(e.Data, &p) == nil {
			at.mu.Lock()
			if cancel := at.asks[p.RequestID]; cancel != nil {
				cancel() // answered elsewhere, or rejected by an abort
			}
			at.mu.Unlock()
		}
	}
}

// resumeRetry is the wait between tries to resume a cut stream whose log
// could not be read.
var resumeRetry = time.Second

// resume replaces a cut subscription (subscribed before the log is read,
// as attach does) and maps the log after *sent. What is not in the log is
// asked of the core: whether the session's work ended in the gap (its idle
// is live only) and which of its permission asks are pending. It returns
// nil once the session is detached or the connection ends.
func (a *Agent) resume(at *attached, mp *mapper, sent *int64) *eventbus.Subscription {
	mp.cut()
	for {
		sub := a.subscribe(at.id)
		at.mu.Lock()
		select {
		case <-at.quit:
			at.mu.Unlock()
			sub.Close()
			return nil
		default:
		}
		at.sub = sub
		at.mu.Unlock()
		err := a.catchUp(at, mp, sent)
		if err == nil {
			return sub
		}
		sub.Close()
		a.log.Warn("acp: resuming session updates", "session", at.id, "err", err)
		select {
		case <-at.quit:
			return nil
		case <-a.life.Done():
			return nil
		case <-time.After(resumeRetry):
		}
	}
}

// catchUp maps the log after *sent, then what the log does not hold.
func (a *Agent) catchUp(at *attached, mp *mapper, sent *int64) error {
	ctx, cancel := context.WithTimeout(a.life, 30*time.Second)
	defer cancel()
	mp.catchUp = true
	defer func() { mp.catchUp = false }()
	for {
		evs, err := a.core.Events(ctx, at.id, *sent, 500)
		if err != nil {
			return err
		}
		for _, e := range evs {
			a.deliver(at, mp, e)
			*sent = e.Seq
		}
		if len(evs) < 500 {
			break
		}
	}
	status, err := a.core.SessionStatus(ctx)
	if err != nil {
		return err
	}
	if status[at.id] == "" {
		// Idle now: the work mapped ended in the gap (a later turn's
		// updates are still to come on the new subscription).
		mp.skipIdle = 0
		a.deliver(at, mp, &opencode.Event{Type: opencode.EvSessionStatus, SessionID: at.id,
			Data: json.RawMessage(`{"status":{"type":"idle"}}`)})
	}
	for _, p := range a.core.Permissions() {
		if p.SessionID != at.id {
			continue
		}
		at.mu.Lock()
		_, asking := at.asks[p.ID]
		at.mu.Unlock()
		if !asking {
			data, _ := json.Marshal(p)
			a.deliver(at, mp, &opencode.Event{Type: opencode.EvPermissionAsked, SessionID: at.id, Data: data})
		}
	}
	return nil
}

// update writes one update of the mapping, in the connection's version.
func (a *Agent) update(sessionID string, u map[string]any) error {
	if u = a.encode(sessionID, u); u == nil {
		return nil
	}
	return a.conn.notify("session/update", map[string]any{"sessionId": sessionID, "update": u})
}

func (a *Agent) detach(id string) {
	a.mu.Lock()
	at := a.sessions[id]
	delete(a.sessions, id)
	a.mu.Unlock()
	if at != nil {
		at.mu.Lock()
		close(at.quit)
		at.sub.Close()
		at.mu.Unlock()
		<-at.done
		// Our permission asks of this session stop waiting for the client
		// (the core's asks stay, for another client to answer).
		at.mu.Lock()
		for _, cancel := range at.asks {
			cancel()
		}
		at.mu.Unlock()
		at.askers.Wait()
	}
}

func (a *Agent) detachAll() {
	a.mu.Lock()
	ids := make([]string, 0, len(a.sessions))
	for id := range a.sessions {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.detach(id)
	}
}

// askPermission asks the client (session/request_permission) and answers
// the core with its choice; a cancelled or failed ask rejects.
func (a *Agent) askPermission(at *attached, e *opencode.Event) {
	var req struct {
		ID         string   `json:"id"`
		Permission string   `json:"permission"`
		Patterns   []string `json:"patterns"`
		Tool       *struct {
			CallID string `json:"callID"`
		} `json:"tool"`
	}
	if json.Unmarshal(e.Data, &req) != nil || req.ID == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	at.mu.Lock()
	if at.asks[req.ID] != nil {
		at.mu.Unlock()
		cancel()
		return // asked already (found pending when a cut stream resumed)
	}
	at.asks[req.ID] = cancel
	at.mu.Unlock()
	callID := req.ID
	if req.Tool != nil && req.Tool.CallID != "" {
		callID = req.Tool.CallID
	}
	title := req.Permission
	if len(req.Patterns) > 0 {
		title += " " + strings.Join(req.Patterns, ", ")
	}
	at.askers.Add(1)
	go func() {
		defer at.askers.Done()
		defer func() {
			at.mu.Lock()
			delete(at.asks, req.ID)
			at.mu.Unlock()
			cancel()
		}()
		call := map[string]any{"toolCallId": callID, "title": title, "status": "pending"}
		ask := map[string]any{
			"sessionId": at.id,
			"toolCall":  call,
			"options": []map[string]any{
				{"optionId": "once", "name": "Allow once", "kind": "allow_once"},
				{"optionId": "always", "name": "Always allow", "kind": "allow_always"},
				{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
			},
		}
		if a.v2.Load() {
			// v2: a title, and the tool call as the ask's subject.
			delete(ask, "toolCall")
			ask["title"] = title
			ask["subject"] = map[string]any{"type": "tool_call", "toolCall": call}
		}
		res, err := a.conn.call(ctx, "session/request_permission", ask)
		if ctx.Err() != nil {
			return // answered elsewhere or aborted: nothing to say
		}
		reply := "reject"
		var out struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		if err == nil && json.Unmarshal(res, &out) == nil && out.Outcome.Outcome == "selected" {
			switch out.Outcome.OptionID {
			case "once", "always":
				reply = out.Outcome.OptionID
			}
		}
		if err := a.core.ReplyPermission(context.Background(), req.ID, reply); err != nil {
			a.log.Debug("acp: permission reply", "request", req.ID, "err", err)
		}
	}()
}

// mapper turns a session's events into ACP session updates. It remembers
// what later events need: tool calls' inputs (for titles, locations and
// diffs), texts ended by the replay (their live deltas are not sent
// again), the title.
type mapper struct {
	calls map[string]toolCall
	ended map[string]bool
	// streamed is a running call's output sent so far as
	// tool_call_content_chunk (by call ID).
	streamed map[string]string
	title    string
	lastSeq  int64
	// cost is the session's cost so far (usage_update reports the total);
	// size its model's context window.
	cost float64
	size int64
	// running: foreground work is going on (a state_update running was
	// mapped and its idle not yet); stop is why its last step ended.
	running bool
	stop    string
	// skipIdle counts turn ends already said (see EvPrompted).
	skipIdle int
	// texts is how much of each live text in progress was sent as deltas
	// (by text or reasoning ID). After a cut (resumed), deltas may have
	// been missed: a text in progress then (partial), or whose start was
	// not seen live, is sent at its end, less what was sent; catchUp is
	// set while the log fills the gap.
	texts            map[string]int
	partial          map[string]bool
	resumed, catchUp bool
}

// cut marks the texts in progress as partial: the subscription was cut.
func (mp *mapper) cut() {
	mp.resumed = true
	for id := range mp.texts {
		mp.partial[id] = true
	}
}

func (mp *mapper) idle() map[string]any {
	return map[string]any{"sessionUpdate": "state_update", "state": "idle", "stopReason": mp.stop}
}

type toolCall struct {
	tool  string
	input map[string]any
}

func newMapper(title string) *mapper {
	return &mapper{calls: map[string]toolCall{}, ended: map[string]bool{}, streamed: map[string]string{}, title: title,
		texts: map[string]int{}, partial: map[string]bool{}}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// updates maps one event; replay is true for the log sent by session/load.
func (mp *mapper) updates(e *opencode.Event, replay bool) []map[string]any {
	if e.Durable && e.Seq > mp.lastSeq {
		mp.lastSeq = e.Seq
	}
	var d map[string]any
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil
	}
	str := func(k string) string { s, _ := d[k].(string); return s }
	switch e.Type {
	case opencode.EvPrompted:
		p, _ := d["prompt"].(map[string]any)
		t, _ := p["text"].(string)
		var out []map[string]any
		if !replay && mp.running && str("delivery") == string(opencode.Queue) {
			// A queued input is delivered only when a turn starts: the
			// work before it is over. Its session.status idle is live and
			// published after the durable events of the same commit (this
			// one), so the idle is said here and that status skipped.
			mp.running = false
			mp.skipIdle++
			out = append(out, mp.idle())
		}
		if !replay && !mp.running {
			// Delivered on an idle session: new work starts with it.
			mp.running, mp.stop = true, "end_turn"
			out = append(out, state("running"))
		}
		return append(out, map[string]any{"sessionUpdate": "user_message_chunk", "content": text(t), "messageId": str("messageID")})
	case opencode.EvSessionStatus:
		st, _ := d["status"].(map[string]any)
		if replay || st["type"] != "idle" {
			return nil
		}
		if mp.skipIdle > 0 {
			mp.skipIdle-- // said when the next work's input came
			return nil
		}
		if !mp.running {
			return nil
		}
		mp.running = false
		return []map[string]any{mp.idle()}
	case opencode.EvPermissionAsked:
		if replay || !mp.running {
			return nil
		}
		return []map[string]any{state("requires_action")}
	case opencode.EvPermissionReply:
		if replay || !mp.running {
			return nil
		}
		return []map[string]any{state("running")}
	case opencode.EvStepFailed:
		var f opencode.StepFailed
		if json.Unmarshal(e.Data, &f) == nil && f.Error.Interrupted() {
			mp.stop = "cancelled" // session/cancel (or an abort over HTTP)
		}
		return nil
	case opencode.EvTextStarted, opencode.EvReasoningStarted:
		if !replay {
			id := str("textID") + str("reasoningID")
			mp.texts[id] = 0
			if mp.catchUp {
				mp.partial[id] = true // started in the gap
			}
		}
		return nil
	case opencode.EvTextDelta, opencode.EvReasoningDelta:
		id := str("textID") + str("reasoningID")
		if replay || mp.ended[id] || mp.partial[id] {
			return nil
		}
		if _, seen := mp.texts[id]; !seen && mp.resumed {
			mp.partial[id] = true // begun before the cut, none of it sent
			return nil
		}
		mp.texts[id] += len(str("delta"))
		kind := "agent_message_chunk"
		if e.Type == opencode.EvReasoningDelta {
			kind = "agent_thought_chunk"
		}
		return []map[string]any{{"sessionUpdate": kind, "content": text(str("delta")), "messageId": str("assistantMessageID")}}
	case opencode.EvTextEnded, opencode.EvReasoningEnded:
		id, whole := str("textID")+str("reasoningID"), str("text")
		if !replay {
			sent, seen := mp.texts[id]
			delete(mp.texts, id)
			if !mp.resumed {
				return nil // streamed as deltas
			}
			mp.ended[id] = true // deltas still queued for it are not sent
			if !mp.partial[id] && seen {
				return nil
			}
			delete(mp.partial, id)
			whole = whole[min(sent, len(whole)):]
		} else {
			mp.ended[id] = true
		}
		if whole == "" {
			return nil
		}
		kind := "agent_message_chunk"
		if e.Type == opencode.EvReasoningEnded {
			kind = "agent_thought_chunk"
		}
		return []map[string]any{{"sessionUpdate": kind, "content": text(whole), "messageId": str("assistantMessageID")}}
	case opencode.EvToolCalled:
		input, _ := d["input"].(map[string]any)
		tool := str("tool")
		mp.calls[str("callID")] = toolCall{tool: tool, input: input}
		u := map[string]any{"sessionUpdate": "tool_call", "toolCallId": str("callID"), "title": toolTitle(tool, input),
			"kind": toolKind(tool), "status": "in_progress", "rawInput": input}
		if loc := locations(input); loc != nil {
			u["locations"] = loc
		}
		return []map[string]any{u}
	case opencode.EvPartUpdated:
		if replay {
			return nil
		}
		return mp.progress(d)
	case opencode.EvToolSuccess:
		delete(mp.streamed, str("callID"))
		c := mp.calls[str("callID")]
		content := []map[string]any{}
		if diff := diffOf(c); diff != nil {
			content = append(content, diff)
		}
		if out := toolText(d["content"]); out != "" {
			content = append(content, map[string]any{"type": "content", "content": text(out)})
		}
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": str("callID"), "status": "completed",
			"content": content}
		if s, ok := d["structured"]; ok && s != nil {
			u["rawOutput"] = s
		}
		return []map[string]any{u}
	case opencode.EvToolFailed:
		delete(mp.streamed, str("callID"))
		msg := ""
		if er, ok := d["error"].(map[string]any); ok {
			msg, _ = er["message"].(string)
		}
		return []map[string]any{{"sessionUpdate": "tool_call_update", "toolCallId": str("callID"), "status": "failed",
			"content": []map[string]any{{"type": "content", "content": text(msg)}}}}
	case opencode.EvStepEnded:
		mp.stop = "end_turn"
		if str("finish") == "length" { // the provider's finish when max_tokens cut it
			mp.stop = "max_tokens"
		}
		tok, _ := d["tokens"].(map[string]any)
		num := func(m map[string]any, k string) int64 { f, _ := m[k].(float64); return int64(f) }
		cache, _ := tok["cache"].(map[string]any)
		used := num(tok, "input") + num(tok, "output") + num(tok, "reasoning") + num(cache, "read")
		u := map[string]any{"sessionUpdate": "usage_update", "used": used, "size": mp.size}
		if cost, ok := d["cost"].(float64); ok {
			mp.cost += cost
			u["cost"] = map[string]any{"amount": mp.cost, "currency": "USD"}
		}
		return []map[string]any{u}
	case opencode.EvAgentSwitched:
		return []map[string]any{{"sessionUpdate": "current_mode_update", "currentModeId": str("agent")}}
	case opencode.EvTodoUpdated:
		todos, _ := d["todos"].([]any)
		entries := []map[string]any{}
		for _, t := range todos {
			m, _ := t.(map[string]any)
			content, _ := m["content"].(string)
			status, _ := m["status"].(string)
			prio, _ := m["priority"].(string)
			switch status {
			case "pending", "in_progress", "completed":
			default:
				status = "completed" // cancelled: no longer to do
			}
			switch prio {
			case "high", "medium", "low":
			default:
				prio = "medium"
			}
			entries = append(entries, map[string]any{"content": content, "priority": prio, "status": status})
		}
		return []map[string]any{{"sessionUpdate": "plan", "entries": entries}}
	case opencode.EvSessionUpdated:
		info, _ := d["info"].(map[string]any)
		title, _ := info["title"].(string)
		if title == "" || title == mp.title {
			return nil
		}
		mp.title = title
		u := map[string]any{"sessionUpdate": "session_info_update", "title": title}
		if tm, ok := info["time"].(map[string]any); ok {
			if up, ok := tm["updated"].(float64); ok {
				u["updatedAt"] = time.UnixMilli(int64(up)).UTC().Format(time.RFC3339Nano)
			}
		}
		return []map[string]any{u}
	}
	return nil
}

// progress maps a running tool's part update (bash: its output so far, in
// metadata.output) to a tool_call_content_chunk of the output not sent
// yet. Output that no longer extends what was sent (cut where the
// preview ends) is not streamed further: the completed call's update
// replaces the whole content.
func (mp *mapper) progress(d map[string]any) []map[string]any {
	p, _ := d["part"].(map[string]any)
	st, _ := p["state"].(map[string]any)
	md, _ := st["metadata"].(map[string]any)
	out, ok := md["output"].(string)
	id, _ := p["callID"].(string)
	if p["type"] != "tool" || st["status"] != "running" || !ok || id == "" {
		return nil
	}
	if _, known := mp.calls[id]; !known {
		return nil // its tool_call was not sent
	}
	sent, streaming := mp.streamed[id]
	if streaming && sent == "\x00" {
		return nil
	}
	if !strings.HasPrefix(out, sent) {
		mp.streamed[id] = "\x00" // stopped
		return nil
	}
	if len(out) == len(sent) {
		return nil
	}
	mp.streamed[id] = out
	return []map[string]any{{"sessionUpdate": "tool_call_content_chunk", "toolCallId": id,
		"content": map[string]any{"type": "content", "content": text(out[len(sent):])}}}
}

// toolKind is the ACP kind of one of our tools.
func toolKind(tool string) string {
	switch tool {
	case "read":
		return "read"
	case "edit", "write", "apply_patch", "patch", "multiedit":
		return "edit"
	case "glob", "grep", "list":
		return "search"
	case "bash":
		return "execute"
	case "webfetch":
		return "fetch"
	case "todowrite", "todoread":
		return "think"
	}
	return "other"
}

func toolTitle(tool string, input map[string]any) string {
	for _, k := range []string{"description", "filePath", "pattern", "command", "url", "path"} {
		if s, ok := input[k].(string); ok && s != "" {
			return tool + ": " + s
		}
	}
	return tool
}

func locations(input map[string]any) []map[string]any {
	for _, k := range []string{"filePath", "path"} {
		if s, ok := input[k].(string); ok && strings.HasPrefix(s, "/") {
			return []map[string]any{{"path": s}}
		}
	}
	return nil
}

// diffOf is an edit's or write's diff content, from its input.
func diffOf(c toolCall) map[string]any {
	path, _ := c.input["filePath"].(string)
	if path == "" {
		return nil
	}
	switch c.tool {
	case "edit":
		oldS, _ := c.input["oldString"].(string)
		newS, _ := c.input["newString"].(string)
		return map[string]any{"type": "diff", "path": path, "oldText": oldS, "newText": newS}
	case "write":
		content, _ := c.input["content"].(string)
		return map[string]any{"type": "diff", "path": path, "oldText": nil, "newText": content}
	}
	return nil
}

// toolText is a tool result's text (the content list of tool.success).
func toolText(v any) string {
	list, _ := v.([]any)
	var out []string
	for _, it := range list {
		m, _ := it.(map[string]any)
		if t, ok := m["text"].(string); ok {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n")
}
