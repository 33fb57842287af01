package acpstub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencode-server/opencode-server/acpclient"
)

// The scripts that use the client's capabilities: files written through
// fs/write_text_file, terminals, the MCP servers it was given.

// Write: "writing" as agent message w1, then, as message w2, an edit tool
// call that writes WrittenText to WrittenFile through fs/write_text_file
// (a diff in its content) and tries OutsideFile beside the directory, and
// says "wrote outside=refused" (or "outside=written").
const (
	Write       = "write"
	WrittenFile = "written.txt"
	WrittenText = "written by the agent\n"
	OutsideFile = "outside.txt"
)

// Terminal: an execute tool call (call-term) that embeds a terminal
// running "echo hi; exit 3", waits for it and reads its output; kills a
// "sleep 100" (program and args); reads a "printf abcdef" kept to
// outputByteLimit 3; runs a command with an env variable; tries a cwd
// beside the directory; runs "rm -f nothing.txt" (refused where the
// rules deny bash "rm *"); releases them and reads one released; opens
// terminals until one is refused (each writes its PID to TermPIDsFile),
// releases them; then says TerminalAnswer's fields.
// TermWait: a terminal that writes its PID in TermPIDsFile, prints
// TermStarted half a second later and sleeps 100 s, embedded in tool call
// call-tw (in progress) at once; then waits for session/cancel as Wait.
const (
	Terminal     = "terminal"
	TermWait     = "termwait"
	TermPIDsFile = "acpstub.termpids"
	TermEnv      = "ACPSTUB_TERM_VAR"
	TermStarted  = "started"
)

// TerminalAnswer is what the Terminal script says, with what it got.
const TerminalAnswer = "out=%q exit=%s killed=%s limited=%q/%v env=%q outside=%s denied=%s released=%s max=%d"

// runCaps runs the scripts of this file; ok is false for another script.
func (a *stub) runCaps(ctx context.Context, script string) (res any, ok bool, err error) {
	switch script {
	case Write:
		res, err = a.write(ctx)
	case Terminal:
		res, err = a.terminal(ctx)
	case TermWait:
		res, err = a.termWait(ctx)
	default:
		return nil, false, nil
	}
	return res, true, err
}

// term runs one terminal request.
func (a *stub) term(ctx context.Context, method string, params map[string]any, res any) error {
	params["sessionId"] = a.sessionID()
	return a.conn.Call(ctx, method, params, res)
}

// create opens a terminal; "" when refused.
func (a *stub) create(ctx context.Context, params map[string]any) string {
	var res acpclient.CreateTerminalResponse
	if err := a.term(ctx, acpclient.MethodTerminalCreate, params, &res); err != nil {
		return ""
	}
	return res.TerminalID
}

func status(s acpclient.TerminalExitStatus) string {
	switch {
	case s.ExitCode != nil:
		return fmt.Sprint(*s.ExitCode)
	case s.Signal != nil:
		return *s.Signal
	}
	return "none"
}

func (a *stub) terminal(ctx context.Context) (any, error) {
	a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-term", "title": "Run echo",
		"kind": "execute", "status": "in_progress", "rawInput": map[string]any{"command": "echo hi; exit 3"}})
	echo := a.create(ctx, map[string]any{"command": "echo hi; exit 3"})
	if echo == "" {
		return nil, fmt.Errorf("terminal/create refused")
	}
	a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-term",
		"content": []any{map[string]any{"type": "terminal", "terminalId": echo}}})
	var exit acpclient.TerminalExitStatus
	if err := a.term(ctx, acpclient.MethodTerminalWait, map[string]any{"terminalId": echo}, &exit); err != nil {
		return nil, err
	}
	var out acpclient.TerminalOutputResponse
	if err := a.term(ctx, acpclient.MethodTerminalOutput, map[string]any{"terminalId": echo}, &out); err != nil {
		return nil, err
	}
	if out.ExitStatus == nil || status(*out.ExitStatus) != status(exit) {
		return nil, fmt.Errorf("terminal/output's exit status %v, wait_for_exit's %s", out.ExitStatus, status(exit))
	}

	sleep := a.create(ctx, map[string]any{"command": "sleep", "args": []string{"100"}})
	var killed acpclient.TerminalExitStatus
	if err := a.term(ctx, acpclient.MethodTerminalKill, map[string]any{"terminalId": sleep}, nil); err != nil {
		return nil, err
	}
	if err := a.term(ctx, acpclient.MethodTerminalWait, map[string]any{"terminalId": sleep}, &killed); err != nil {
		return nil, err
	}

	limited := a.create(ctx, map[string]any{"command": "printf", "args": []string{"abcdef"}, "outputByteLimit": 3})
	var lim acpclient.TerminalOutputResponse
	if err := a.term(ctx, acpclient.MethodTerminalWait, map[string]any{"terminalId": limited}, nil); err != nil {
		return nil, err
	}
	if err := a.term(ctx, acpclient.MethodTerminalOutput, map[string]any{"terminalId": limited}, &lim); err != nil {
		return nil, err
	}

	env := a.create(ctx, map[string]any{"command": "printf %s \"$" + TermEnv + "\"",
		"env": []any{map[string]any{"name": TermEnv, "value": "envok"}}})
	var envOut acpclient.TerminalOutputResponse
	_ = a.term(ctx, acpclient.MethodTerminalWait, map[string]any{"terminalId": env}, nil)
	_ = a.term(ctx, acpclient.MethodTerminalOutput, map[string]any{"terminalId": env}, &envOut)

	cwd, _ := os.Getwd()
	outside := "allowed"
	if a.create(ctx, map[string]any{"command": "true", "cwd": filepath.Dir(cwd)}) == "" {
		outside = "refused"
	}

	denied := "allowed"
	if id := a.create(ctx, map[string]any{"command": "rm", "args": []string{"-f", "nothing.txt"}}); id == "" {
		denied = "refused"
	} else {
		_ = a.term(ctx, acpclient.MethodTerminalRelease, map[string]any{"terminalId": id}, nil)
	}

	for _, id := range []string{echo, sleep, limited, env} {
		if err := a.term(ctx, acpclient.MethodTerminalRelease, map[string]any{"terminalId": id}, nil); err != nil {
			return nil, err
		}
	}
	released := "readable"
	if err := a.term(ctx, acpclient.MethodTerminalOutput, map[string]any{"terminalId": echo}, nil); err != nil {
		released = "gone"
	}

	var opened []string
	for range 100 {
		id := a.create(ctx, map[string]any{"command": "echo $$ >> " + TermPIDsFile + "; exec sleep 100"})
		if id == "" {
			break
		}
		opened = append(opened, id)
	}
	for _, id := range opened {
		if err := a.term(ctx, acpclient.MethodTerminalRelease, map[string]any{"terminalId": id}, nil); err != nil {
			return nil, err
		}
	}

	a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-term", "status": "completed"})
	a.say("agent_message_chunk", fmt.Sprintf(TerminalAnswer, out.Output, status(exit), status(killed), lim.Output, lim.Truncated,
		envOut.Output, outside, denied, released, len(opened)), "")
	return endTurn()
}

func (a *stub) termWait(ctx context.Context) (any, error) {
	id := a.create(ctx, map[string]any{"command": "echo $$ >> " + TermPIDsFile + "; sleep 0.5; echo " + TermStarted + "; exec sleep 100"})
	if id == "" {
		return nil, fmt.Errorf("terminal/create refused")
	}
	a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-tw", "title": "Sleep",
		"kind": "execute", "status": "in_progress", "content": []any{map[string]any{"type": "terminal", "terminalId": id}}})
	a.say("agent_message_chunk", "waiting", "")
	select {
	case <-a.cancel:
		return map[string]any{"stopReason": acpclient.StopCancelled}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *stub) write(ctx context.Context) (any, error) {
	cwd, _ := os.Getwd()
	path := filepath.Join(cwd, WrittenFile)
	a.say("agent_message_chunk", "writing", "w1")
	old := ""
	if b, err := os.ReadFile(path); err == nil {
		old = string(b)
	}
	a.update(map[string]any{"sessionUpdate": "tool_call", "messageId": "w2", "toolCallId": "call-write", "title": "Write " + WrittenFile,
		"kind": "edit", "status": "in_progress", "rawInput": map[string]any{"path": path, "content": WrittenText},
		"locations": []any{map[string]any{"path": path}}})
	if err := a.conn.Call(ctx, acpclient.MethodWriteTextFile, map[string]any{"sessionId": a.sessionID(), "path": path,
		"content": WrittenText}, nil); err != nil {
		return nil, err
	}
	outside := "written"
	if err := a.conn.Call(ctx, acpclient.MethodWriteTextFile, map[string]any{"sessionId": a.sessionID(),
		"path": filepath.Join(filepath.Dir(cwd), OutsideFile), "content": "no"}, nil); err != nil {
		outside = "refused"
	}
	a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-write", "status": "completed",
		"content": []any{map[string]any{"type": "diff", "path": path, "oldText": old, "newText": WrittenText}}})
	a.say("agent_message_chunk", fmt.Sprintf("wrote outside=%s", outside), "w2")
	return endTurn()
}

// MCPFile gets, for each session/new and session/load, the MCP servers
// it was given (an MCPRecord a line).
const MCPFile = "acpstub.mcp"

// MCPRecord is one session/new's or session/load's mcpServers, as sent.
type MCPRecord struct {
	Method     string            `json:"method"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

func recordMCP(method string, params json.RawMessage) {
	var req struct {
		MCPServers []json.RawMessage `json:"mcpServers"`
	}
	_ = json.Unmarshal(params, &req)
	b, _ := json.Marshal(MCPRecord{Method: method, MCPServers: req.MCPServers})
	appendLine(MCPFile, string(b))
}
