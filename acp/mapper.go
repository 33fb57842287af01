package acp

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
)

// The mapping of a session's events to ACP session/update notifications:
// what a client that follows the session is told, live or replayed.

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
