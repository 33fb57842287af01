package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
)

// ext (issue 33): first text of prompts to an external agent (-agent), all
// on one session after a warm-up prompt that starts its process, then
// -ext-sessions sessions that each run one prompt and go idle: the
// server's RSS and its live agent processes (children) then. With
// -acp-bare the same agent is also driven bare, prompt for prompt in
// turn: the difference of the ext_first and ext_bare_first medians is
// what the bridge adds.
func (b *bench) ext() error {
	if b.o.agent == "" {
		return fmt.Errorf("scenario ext needs -agent")
	}
	sid, err := b.createSession()
	if err != nil {
		return err
	}
	if _, err := b.prompt(sid, "warm-up prompt"); err != nil {
		return fmt.Errorf("ext warm-up: %w", err)
	}
	var bare *bareACP
	if b.o.acpBare != "" {
		if bare, err = startBare(b.o.acpBare); err != nil {
			return fmt.Errorf("-acp-bare: %w", err)
		}
		defer bare.p.Kill()
		if _, err := bare.prompt("warm-up prompt", b.o.timeout); err != nil {
			return fmt.Errorf("-acp-bare warm-up: %w", err)
		}
	}
	var rs, brs []result
	c0 := b.cpu() // the server idles during the bare prompts
	for i := 0; i < b.o.n; i++ {
		text := fmt.Sprintf("external prompt %d on one session", i)
		// With the bare agent, the two alternate (each first every other
		// time), so load on the machine hits both alike.
		if bare != nil && i%2 == 0 {
			r, err := bare.prompt(text, b.o.timeout)
			if err != nil {
				return err
			}
			brs = append(brs, r)
		}
		r, err := b.prompt(sid, text)
		if err != nil {
			return err
		}
		if r.noText {
			return fmt.Errorf("external prompt %d: no text before session.idle", i)
		}
		rs = append(rs, r)
		if bare != nil && i%2 == 1 {
			r, err := bare.prompt(text, b.o.timeout)
			if err != nil {
				return err
			}
			brs = append(brs, r)
		}
	}
	b.report("ext", "(ext) bridged, same session", rs)
	if bare != nil {
		b.report("ext_bare", "(ext) bare ACP, same session", brs)
	}
	b.cpuPerPrompt("ext_cpu_ms_per_prompt", "(ext) bridged", c0, b.o.n)

	for i := 1; i < b.o.extSessions; i++ { // the measured session is the first
		sid, err := b.createSession()
		if err != nil {
			return err
		}
		if _, err := b.prompt(sid, fmt.Sprintf("idle session %d", i)); err != nil {
			return err
		}
	}
	// A stopped agent is reaped off the runner: wait until the number of
	// live children holds still for a second before sampling.
	n, since := children(b.o.pid), time.Now()
	for deadline := time.Now().Add(15 * time.Second); time.Since(since) < time.Second && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if m := children(b.o.pid); m != n {
			n, since = m, time.Now()
		}
	}
	b.summary["ext_sessions"] = b.o.extSessions
	b.summary["ext_agents_live"] = n
	b.printf("(ext) %d sessions ran one external prompt each and went idle: %d agent processes live\n", b.o.extSessions, n)
	b.sampleRSS("rss_ext_idle_kb", fmt.Sprintf("with %d idle external sessions", b.o.extSessions))
	return nil
}

// children counts the live (not zombie) child processes of pid, -1
// without -pid.
func children(pid int) int {
	if pid == 0 {
		return -1
	}
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(st), ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(string(st[i+1:])) // state, ppid, ...
		if len(fs) > 1 && fs[0] != "Z" && fs[1] == fmt.Sprint(pid) {
			n++
		}
	}
	return n
}

// bareACP is the agent with no server between: the command line of
// -acp-bare spoken to directly over ACP, with the same client codec the
// bridge uses (acpclient), on one session.
type bareACP struct {
	p   *acpclient.Process
	sid string
	// Notifications are handled in order on the reading goroutine, so the
	// first chunk's time is set before session/prompt's answer is seen.
	mu      sync.Mutex
	waiting bool
	firstAt time.Time
}

// startBare starts the agent in the working directory: initialize and
// session/new.
func startBare(cmdline string) (*bareACP, error) {
	args := strings.Fields(cmdline)
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	c := &bareACP{}
	c.p, err = acpclient.Start(acpclient.Spec{Command: args[0], Args: args[1:]}, dir,
		slog.New(slog.NewTextHandler(io.Discard, nil)), acpclient.Handlers{Notify: c.notify})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.p.Call(ctx, "initialize", acpclient.InitializeRequest{ProtocolVersion: 1}, nil); err != nil {
		c.p.Kill()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var ns acpclient.NewSessionResponse
	if err := c.p.Call(ctx, "session/new", acpclient.NewSessionRequest{Cwd: dir, MCPServers: []any{}}, &ns); err != nil {
		c.p.Kill()
		return nil, fmt.Errorf("session/new: %w", err)
	}
	c.sid = ns.SessionID
	return c, nil
}

func (c *bareACP) notify(method string, params json.RawMessage) {
	now := time.Now()
	var n struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if method != "session/update" || json.Unmarshal(params, &n) != nil || n.Update.SessionUpdate != "agent_message_chunk" {
		return
	}
	c.mu.Lock()
	if c.waiting && c.firstAt.IsZero() {
		c.firstAt = now
	}
	c.mu.Unlock()
}

// prompt sends session/prompt: first is the first agent_message_chunk,
// idle the answer.
func (c *bareACP) prompt(text string, timeout time.Duration) (result, error) {
	c.mu.Lock()
	c.waiting, c.firstAt = true, time.Time{}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var pr acpclient.PromptResponse
	t0 := time.Now()
	err := c.p.Call(ctx, "session/prompt", acpclient.PromptRequest{SessionID: c.sid,
		Prompt: []acpclient.ContentBlock{{Type: "text", Text: text}}}, &pr)
	idle := time.Since(t0)
	c.mu.Lock()
	fa := c.firstAt
	c.waiting = false
	c.mu.Unlock()
	if err != nil {
		return result{}, fmt.Errorf("session/prompt: %w", err)
	}
	if fa.IsZero() {
		return result{}, fmt.Errorf("session/prompt %q: no agent_message_chunk before its answer (%s)", text, pr.StopReason)
	}
	return result{first: fa.Sub(t0), idle: idle}, nil
}

// bare is the ext scenario's first-text series on the bare agent alone
// (-acp-bare without -url): a warm-up prompt, then -n prompts.
func (b *bench) bare() error {
	c, err := startBare(b.o.acpBare)
	if err != nil {
		return err
	}
	defer c.p.Kill()
	b.printf("# ocbench %s: bare ACP client against %q (pid %d)\n", b.o.label, b.o.acpBare, c.p.Pid())
	if _, err := c.prompt("warm-up prompt", b.o.timeout); err != nil {
		return err
	}
	var rs []result
	for i := 0; i < b.o.n; i++ {
		r, err := c.prompt(fmt.Sprintf("external prompt %d on one session", i), b.o.timeout)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("ext_bare", "(ext) bare ACP, same session", rs)
	summaryLine(b.out, b.summary)
	return nil
}
