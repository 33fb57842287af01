package acpstub

import (
	"context"
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

// runCaps runs the scripts of this file; ok is false for another script.
func (a *stub) runCaps(ctx context.Context, script string) (res any, ok bool, err error) {
	switch script {
	case Write:
		res, err = a.write(ctx)
		return res, true, err
	}
	return nil, false, nil
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
