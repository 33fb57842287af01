package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestHelperACPAgent is not a test: run as a child with
// OCBENCH_TEST_ACP_AGENT=1 it is a minimal ACP agent on its stdio. A
// prompt answers one agent_message_chunk, then (20 ms later) its result;
// a prompt saying "silent" answers with no chunk.
func TestHelperACPAgent(t *testing.T) {
	if os.Getenv("OCBENCH_TEST_ACP_AGENT") != "1" {
		return
	}
	sc := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		var res any
		switch m.Method {
		case "initialize":
			res = map[string]any{"protocolVersion": 1}
		case "session/new":
			res = map[string]any{"sessionId": "s1"}
		case "session/prompt":
			if len(m.Params.Prompt) == 0 || m.Params.Prompt[0].Text != "silent" {
				_ = out.Encode(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
					"sessionId": "s1", "update": map[string]any{"sessionUpdate": "agent_message_chunk",
						"content": map[string]any{"type": "text", "text": "hi"}}}})
				time.Sleep(20 * time.Millisecond)
			}
			res = map[string]any{"stopReason": "end_turn"}
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
	}
	os.Exit(0)
}

// TestBareACP: the bare client times a prompt's first agent_message_chunk
// (before its answer), fails a prompt that streamed none, and its agent
// is a live child of ours until killed.
func TestBareACP(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if children(0) != -1 {
		t.Errorf("children without -pid = %d, want -1", children(0))
	}
	before := children(os.Getpid())
	t.Setenv("OCBENCH_TEST_ACP_AGENT", "1")
	c, err := startBare(os.Args[0] + " -test.run=^TestHelperACPAgent$")
	if err != nil {
		t.Fatal(err)
	}
	defer c.p.Kill()
	if c.sid != "s1" {
		t.Errorf("session %q, want s1 (from session/new)", c.sid)
	}
	if n := children(os.Getpid()); n != before+1 {
		t.Errorf("children with the agent running = %d, want %d", n, before+1)
	}
	r, err := c.prompt("hello", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The chunk is written 20 ms before the answer: it is seen first.
	if r.first <= 0 || r.idle < 20*time.Millisecond || r.first > r.idle {
		t.Errorf("first %v, idle %v: want 0 < first <= idle and idle >= 20ms", r.first, r.idle)
	}
	if _, err := c.prompt("silent", time.Minute); err == nil || !strings.Contains(err.Error(), "no agent_message_chunk") {
		t.Errorf("a prompt with no chunk: err %v, want no agent_message_chunk", err)
	}
	// The earlier prompt's chunk does not count for the next one.
	if r, err := c.prompt("again", time.Minute); err != nil || r.first > r.idle {
		t.Errorf("second prompt: %+v, %v", r, err)
	}
	c.p.Kill()
	n := children(os.Getpid())
	for t0 := time.Now(); n != before && time.Since(t0) < 30*time.Second; n = children(os.Getpid()) {
		time.Sleep(10 * time.Millisecond)
	}
	if n != before {
		t.Errorf("children after Kill = %d, want %d", n, before)
	}
}
