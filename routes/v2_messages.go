package routes

// v2 message projections: a session's messages in the v2 shapes.

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/opencode-server/opencode-server/opencode"
)

// messageV2 projects a v1 message with parts onto the v2 SessionMessage shape.
func messageV2(mp opencode.MessageWithParts) map[string]any {
	info := mp.Info
	if info.Role == opencode.User {
		p := opencode.PromptOf(mp.Parts)
		out := map[string]any{"id": info.ID, "type": "user", "text": p.Text, "time": map[string]any{"created": info.Time.Created}}
		if len(p.Files) > 0 {
			out["files"] = p.Files
		}
		if len(p.Agents) > 0 {
			out["agents"] = p.Agents
		}
		return out
	}
	content := []map[string]any{}
	for _, p := range mp.Parts {
		switch p.Type {
		case opencode.PartText:
			content = append(content, map[string]any{"type": "text", "id": p.ID, "text": p.Text})
		case opencode.PartReasoning:
			content = append(content, map[string]any{"type": "reasoning", "id": p.ID, "text": p.Text})
		case opencode.PartTool:
			content = append(content, toolV2(p))
		}
	}
	t := map[string]any{"created": info.Time.Created}
	if info.Time.Completed != nil {
		t["completed"] = *info.Time.Completed
	}
	out := map[string]any{"id": info.ID, "type": "assistant", "agent": info.Agent, "time": t,
		"model": map[string]any{"id": info.ModelID, "providerID": info.ProviderID}, "content": content,
		"cost": info.Cost, "tokens": tokensV2{Input: info.Tokens.Input, Output: info.Tokens.Output,
			Reasoning: info.Tokens.Reasoning, Cache: info.Tokens.Cache}}
	if info.Finish != "" {
		out["finish"] = info.Finish
	}
	if info.Error != nil {
		msg, _ := info.Error.Data["message"].(string)
		out["error"] = map[string]any{"type": "unknown", "message": msg}
		out["finish"] = "error"
	}
	return out
}

// toolV2 is a tool part as v2 assistant content: OpenCode names it by its
// call ID and keeps created/ran/completed times.
func toolV2(p opencode.Part) map[string]any {
	st := p.State
	if st == nil {
		st = &opencode.ToolState{Status: "pending"}
	}
	input := st.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	state := map[string]any{"status": st.Status, "input": input}
	times := map[string]any{}
	if st.Time != nil {
		times["created"] = st.Time.Start
		times["ran"] = st.Time.Start
		if st.Time.End != nil {
			times["completed"] = *st.Time.End
		}
	}
	switch st.Status {
	case "completed":
		structured, content := opencode.ToolOutcome(p)
		state["structured"], state["content"], state["outputPaths"] = structured, content, []string{}
	case "error":
		state["structured"], state["content"] = map[string]any{}, []any{}
		state["error"] = map[string]any{"type": "unknown", "message": st.Error}
		state["result"] = map[string]any{"type": "error", "value": st.Error}
	}
	return map[string]any{"type": "tool", "id": p.CallID, "name": p.Tool, "provider": opencode.ToolProvider,
		"state": state, "time": times}
}

func (s *Server) v2Messages(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, err := pageLimit(r, 100)
	if err != nil {
		return err
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return badRequest("Query", "order", "Expected \"asc\" or \"desc\" at [\"order\"]")
	}
	pq := opencode.PageQuery{Limit: limit}
	if v := q.Get("cursor"); v != "" {
		if order != "" {
			return badRequest("Query", "cursor", "Do not combine cursor with order")
		}
		c, err := parseCursor(v)
		if err != nil || c.ID == "" {
			return errCursor
		}
		order, pq.Anchor, pq.Before = c.Order, c.ID, c.Direction == "previous"
	}
	if order == "" {
		order = "desc" // newest first, as the real server
	}
	pq.Desc = order == "desc"
	msgs, err := s.m.MessagesPage(r.Context(), id, pq)
	if err != nil {
		var oe *opencode.Error
		if errors.As(err, &oe) && oe.Code == opencode.EInvalid {
			return errCursor
		}
		return err
	}
	out := make([]map[string]any, 0, len(msgs))
	for _, mp := range msgs {
		out = append(out, messageV2(mp))
	}
	var prev, next pageCursor
	if n := len(msgs); n > 0 {
		prev = pageCursor{ID: msgs[0].Info.ID, Order: order, Direction: "previous"}
		next = pageCursor{ID: msgs[n-1].Info.ID, Order: order, Direction: "next"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "cursor": cursors(len(out) == 0, prev, next)})
	return nil
}

func (s *Server) v2Message(w http.ResponseWriter, r *http.Request) error {
	id, mid, err := sessionAndMessage(r)
	if err != nil {
		return err
	}
	mp, err := s.m.Message(r.Context(), id, mid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": messageV2(mp)})
	return nil
}
