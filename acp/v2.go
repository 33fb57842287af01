package acp

// ACP v2 (schema/v2 2.0.0-alpha.3) beside v1, negotiated per connection,
// and RFD #1261's session/inject, revoke_inject and replace_inject.
//
// One mapping (mapper.updates) turns our events into updates; encode
// writes them in the connection's version. v2's prompt answers {} once
// its admission is durable; the delivered message is a user_message
// with the input's msg_ ID; progress and the end of work are
// state_update. inject is Admit (queue) or AdmitIfRunning (steer);
// revoke and replace are the core's Revoke and Replace, each one runner
// command, so an answer can never contradict what the runner delivers.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// Our protocol versions: v1 (unchanged) and v2, the latest.
const (
	protocolV1     = 1
	protocolV2     = 2
	protocolLatest = protocolV2
)

// codeInjectRefused is RFD #1261's error of an inject operation the
// session's state refuses; data.reason says why.
const codeInjectRefused = -32010

// injectError is a -32010 (or, for an unknown ID, -32002) with RFD
// #1261's data.
func injectError(code int, reason, messageID, msg string) error {
	data := map[string]any{"reason": reason}
	if messageID != "" {
		data["messageId"] = messageID
	}
	return &rpcError{Code: code, Message: msg, Data: data}
}

// initializeV2 answers a v2 client: info and capabilities, the baseline
// session methods (new, list, resume, close, prompt, cancel) and inject.
func (a *Agent) initializeV2() map[string]any {
	prompt := map[string]any{"embeddedContext": map[string]any{}}
	if a.defaultAccepts("image") {
		prompt["image"] = map[string]any{}
	}
	return map[string]any{
		"protocolVersion": protocolV2,
		"info":            map[string]any{"name": "opencode-server", "title": "opencode-server", "version": a.version},
		"capabilities": map[string]any{
			"session": map[string]any{
				"prompt": prompt,
				"delete": map[string]any{},
				"inject": map[string]any{
					"modes": []string{"queue", "steer"},
					// A steer that arrives while the model streams lets
					// the stream finish: it is delivered at the next
					// model call (after the running tool calls).
					"steer_in_stream": []string{"finish"},
					"pending":         map[string]any{"replace": true},
				},
			},
		},
		"authMethods": []any{},
	}
}

// encode writes one update of the mapping in the connection's version;
// nil: the version has no such update.
func (a *Agent) encode(sessionID string, u map[string]any) map[string]any {
	return encodeUpdate(u, a.v2.Load(), func() []map[string]any {
		s, err := a.core.GetSession(a.life, sessionID)
		if err != nil {
			return nil
		}
		return a.configOptions(s)
	})
}

// encodeUpdate is the v1 or v2 encoding of an update of the mapping
// (written in v1's words, plus state_update). options are the session's
// config options (v2 reports a mode switch as them).
func encodeUpdate(u map[string]any, v2 bool, options func() []map[string]any) map[string]any {
	kind, _ := u["sessionUpdate"].(string)
	if !v2 {
		switch kind {
		case "state_update":
			return nil // v1 says it with the prompt's reply
		case "tool_call_content_chunk":
			return nil // v1 sends a tool's output whole when it ends
		case "available_commands_update":
			// v1: no input (as opencode acp lists commands).
			cmds, _ := u["availableCommands"].([]map[string]any)
			out := make([]map[string]any, len(cmds))
			for i, c := range cmds {
				out[i] = maps.Clone(c)
				delete(out[i], "input")
			}
			return map[string]any{"sessionUpdate": kind, "availableCommands": out}
		}
		return u
	}
	switch kind {
	case "user_message_chunk":
		// The whole delivered message, under its ID.
		return map[string]any{"sessionUpdate": "user_message", "messageId": u["messageId"], "content": []any{u["content"]}}
	case "tool_call", "tool_call_update":
		// v2: the first tool_call_update of an ID creates the call; a
		// diff names its changes.
		c := maps.Clone(u)
		c["sessionUpdate"] = "tool_call_update"
		if content, ok := u["content"].([]map[string]any); ok {
			out := make([]map[string]any, len(content))
			for i, it := range content {
				out[i] = it
				if it["type"] == "diff" {
					op := "modify"
					if it["oldText"] == nil {
						op = "add"
					}
					out[i] = map[string]any{"type": "diff", "changes": []map[string]any{{"operation": op, "path": it["path"]}}}
				}
			}
			c["content"] = out
		}
		return c
	case "plan":
		return map[string]any{"sessionUpdate": "plan_update",
			"plan": map[string]any{"type": "items", "planId": "todo", "entries": u["entries"]}}
	case "current_mode_update":
		opts := options()
		if opts == nil {
			return nil
		}
		return map[string]any{"sessionUpdate": "config_option_update", "configOptions": opts}
	}
	return u
}

func state(s string) map[string]any {
	return map[string]any{"sessionUpdate": "state_update", "state": s}
}

// promptV2 admits a prompt as a queued input and answers once the
// admission is durable (with the message ID it was admitted under); its
// user_message follows, when it is delivered.
func (a *Agent) promptV2(ctx context.Context, params json.RawMessage) (any, error) {
	var p promptParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	// v2: the agent mints every message ID.
	at, in, err := a.input(ctx, p.SessionID, p.Prompt, "", opencode.Queue)
	if err != nil {
		return nil, err
	}
	in.Agent, in.Parts = a.slash(ctx, p.SessionID, in.Parts)
	// The draft the SDK's v2 client speaks (@agentclientprotocol/sdk
	// 2.4.0) requires messageId in the answer; alpha.3 leaves it to _meta:
	// both are sent.
	return a.admitV2(ctx, at, in, false, map[string]any{"messageId": in.ID, "_meta": map[string]any{"messageId": in.ID}})
}

// admitV2 admits in and answers res before any update of the session
// (its user_message included) is written: the session's stream waits at
// its gate from before the admission until the reply is out.
func (a *Agent) admitV2(ctx context.Context, at *attached, in *opencode.Input, onlyRunning bool, res any) (any, error) {
	at.gate.Lock()
	ctx = context.WithoutCancel(ctx)
	var err error
	running := true
	if onlyRunning {
		_, _, running, err = a.core.AdmitIfRunning(ctx, in)
	} else {
		_, _, err = a.core.Admit(ctx, in)
	}
	if err != nil {
		at.gate.Unlock()
		return nil, coreError(err)
	}
	if !running {
		at.gate.Unlock()
		return nil, injectError(codeInjectRefused, "no_running_turn", "",
			"no running turn to steer into: nothing was admitted (use mode queue or session/prompt)")
	}
	return replyThen{res: res, then: at.gate.Unlock}, nil
}

// keepSteers makes the session's pending steers queued inputs before a v2
// session/cancel aborts the work: RFD #1261 has pending injects survive a
// cancel and be delivered once idle, while the core's abort revokes the
// steers aimed at the aborted turn (v1's _session/steering relies on
// that). Each is the core's Replace, in place: a steer delivered meanwhile
// stays delivered (it joined the work before the cancel).
func (a *Agent) keepSteers(ctx context.Context, sessionID string) {
	pending, err := a.core.Inbox(ctx, sessionID)
	if err != nil {
		return
	}
	q := opencode.Queue
	for _, in := range pending {
		if in.Delivery == opencode.Steer {
			_, _ = a.core.Replace(ctx, sessionID, in.ID, &q, nil)
		}
	}
}

type injectParams struct {
	SessionID string         `json:"sessionId"`
	Mode      string         `json:"mode"`
	Content   []contentBlock `json:"content"`
}

// inject is session/inject: queue (after the current work is idle; on an
// idle session it starts work) or steer (at the running turn's next model
// call; none running: no_running_turn, nothing admitted). The reply names
// the message ID its user_message will carry.
//
// Requests are handled one at a time in arrival order, so a
// $/cancel_request for an inject is read after its reply: it has nothing
// left to cancel (the RFD: revoke_inject from then on).
func (a *Agent) inject(ctx context.Context, params json.RawMessage) (any, error) {
	var p injectParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	var d opencode.Delivery
	switch p.Mode {
	case "queue":
		d = opencode.Queue
	case "steer":
		d = opencode.Steer
	default:
		return nil, invalid("mode must be queue or steer")
	}
	at, in, err := a.input(ctx, p.SessionID, p.Content, "", d)
	if err != nil {
		return nil, err
	}
	return a.admitV2(ctx, at, in, d == opencode.Steer, map[string]any{"messageId": in.ID})
}

// known refuses a message ID the session never admitted (nor revoked
// before: a tombstone) as unknown_message_id. In v2 the agent mints every
// ID and admits it before its reply names it, so an ID the store does not
// hold is one no client was ever given.
func (a *Agent) known(ctx context.Context, sessionID, id string) error {
	_, err := a.core.Input(ctx, sessionID, id)
	var oe *opencode.Error
	if errors.As(err, &oe) && oe.Code == opencode.ENotFound {
		return injectError(codeNotFound, "unknown_message_id", id, "unknown message ID "+id)
	}
	return coreError(err)
}

// revokeInject is session/revoke_inject: the core's Revoke, which answers
// from the runner's own inbox in one command. Delivered first:
// already_delivered (its user_message is or will be written); already
// revoked: success.
func (a *Agent) revokeInject(ctx context.Context, params json.RawMessage) (any, error) {
	var p inputRef
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if err := a.known(ctx, p.SessionID, p.MessageID); err != nil {
		return nil, err
	}
	if _, err := a.core.Revoke(ctx, p.SessionID, p.MessageID); err != nil {
		return nil, a.injectCoreError(err, p.MessageID)
	}
	return struct{}{}, nil
}

// replaceInject is session/replace_inject: new content for a pending
// message, same ID, mode and place (the core's Replace, one runner
// command: either the new content is what gets delivered, or the old one
// already was and the answer is already_delivered).
func (a *Agent) replaceInject(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		inputRef
		Content []contentBlock `json:"content"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	parts, err := a.parts(p.Content)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if err := a.known(ctx, p.SessionID, p.MessageID); err != nil {
		return nil, err
	}
	in, err := a.core.Replace(ctx, p.SessionID, p.MessageID, nil, parts)
	if err != nil {
		return nil, a.injectCoreError(err, p.MessageID)
	}
	return map[string]any{"messageId": in.ID}, nil
}

// injectCoreError maps the core's refusal of a revoke or replace.
func (a *Agent) injectCoreError(err error, id string) error {
	var oe *opencode.Error
	if errors.As(err, &oe) {
		switch oe.Code {
		case opencode.EConflict:
			// No longer pending: delivered (or, for a replace, revoked).
			if in, ierr := a.core.Input(a.life, oe.SessionID, id); ierr == nil && in.State == opencode.InputRevoked {
				return injectError(codeInjectRefused, "already_revoked", id, oe.Message)
			}
			return injectError(codeInjectRefused, "already_delivered", id, oe.Message)
		case opencode.ERevoked:
			return injectError(codeInjectRefused, "already_revoked", id, oe.Message)
		case opencode.ENotFound:
			return injectError(codeNotFound, "unknown_message_id", id, oe.Message)
		}
	}
	return coreError(err)
}

// pageSize is how many sessions one v2 session/list answer holds.
var pageSize = 50

// page is one page of a v2 session/list: the sessions, most recently
// updated first (ties by ID), after the cursor's; next is the cursor of
// the page after it, "" when there is none. The cursor is opaque to the
// client: base64url of the last listed session's update time and ID, so
// a page starts after that session wherever it is, and sessions created
// or deleted while a client pages neither repeat nor shift the others (a
// session updated meanwhile moves to the first page).
func page(list []opencode.Session, cursor *string) (_ []opencode.Session, next string, _ error) {
	after := func(s opencode.Session, upd int64, id string) bool {
		return s.Time.Updated < upd || s.Time.Updated == upd && s.ID > id
	}
	slices.SortStableFunc(list, func(x, y opencode.Session) int {
		if c := cmp.Compare(y.Time.Updated, x.Time.Updated); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	if cursor != nil && *cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(*cursor)
		ts, id, ok := strings.Cut(string(b), ":")
		upd, perr := strconv.ParseInt(ts, 10, 64)
		if err != nil || !ok || perr != nil || id == "" {
			return nil, "", invalid("invalid params: cursor is not one of session/list's")
		}
		i := slices.IndexFunc(list, func(s opencode.Session) bool { return after(s, upd, id) })
		if i < 0 {
			i = len(list)
		}
		list = list[i:]
	}
	if len(list) <= pageSize {
		return list, "", nil
	}
	last := list[pageSize-1]
	next = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(last.Time.Updated, 10) + ":" + last.ID))
	return list[:pageSize], next, nil
}
