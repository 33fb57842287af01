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
// server's RSS and its live agent processes (children) then. Run
// against the same agent driven bare (-acp-bare), the difference of the
// ext_first medians is what the bridge adds.
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
	c0 := b.cpu()
	var rs []result
	for i := 0; i < b.o.n; i++ {
		r, err := b.prompt(sid, fmt.Sprintf("external prompt %d on one session", i))
		if err != nil {
			return err
		}
		if r.noText {
			return fmt.Errorf("external prompt %d: no text before session.idle", i)
		}
		rs = append(rs, r)
	}
	b.report("ext", "(ext) bridged, same session", rs)
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

// bare is the ext scenario's first-text series with no server between:
// the agent command line (-acp-bare) spoken to directly over ACP, with
// the same client codec the bridge uses (acpclient). One session, a
// warm-up prompt, then -n prompts; first text is the first
// agent_message_chunk after session/prompt was written.
func (b *bench) bare() error {
	args := strings.Fields(b.o.acpBare)
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	// Notifications are handled in order on the reading goroutine, so the
	// first chunk's time is set before session/prompt's answer is seen.
	var mu sync.Mutex
	var waiting bool
	var firstAt time.Time
	p, err := acpclient.Start(acpclient.Spec{Command: args[0], Args: args[1:]}, dir,
		slog.New(slog.NewTextHandler(io.Discard, nil)), acpclient.Handlers{
			Notify: func(method string, params json.RawMessage) {
				now := time.Now()
				var n struct {
					Update struct {
						SessionUpdate string `json:"sessionUpdate"`
					} `json:"update"`
				}
				if method != "session/update" || json.Unmarshal(params, &n) != nil || n.Update.SessionUpdate != "agent_message_chunk" {
					return
				}
				mu.Lock()
				if waiting && firstAt.IsZero() {
					firstAt = now
				}
				mu.Unlock()
			}})
	if err != nil {
		return err
	}
	defer p.Kill()
	b.printf("# ocbench %s: bare ACP client against %q (pid %d)\n", b.o.label, b.o.acpBare, p.Pid())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := p.Call(ctx, "initialize", acpclient.InitializeRequest{ProtocolVersion: 1}, nil); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var ns acpclient.NewSessionResponse
	if err := p.Call(ctx, "session/new", acpclient.NewSessionRequest{Cwd: dir, MCPServers: []any{}}, &ns); err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	prompt := func(text string) (result, error) {
		mu.Lock()
		waiting, firstAt = true, time.Time{}
		mu.Unlock()
		pctx, pcancel := context.WithTimeout(ctx, b.o.timeout)
		defer pcancel()
		var pr acpclient.PromptResponse
		t0 := time.Now()
		err := p.Call(pctx, "session/prompt", acpclient.PromptRequest{SessionID: ns.SessionID,
			Prompt: []acpclient.ContentBlock{{Type: "text", Text: text}}}, &pr)
		idle := time.Since(t0)
		mu.Lock()
		fa := firstAt
		waiting = false
		mu.Unlock()
		if err != nil {
			return result{}, fmt.Errorf("session/prompt: %w", err)
		}
		if fa.IsZero() {
			return result{}, fmt.Errorf("session/prompt %q: no agent_message_chunk before its answer (%s)", text, pr.StopReason)
		}
		return result{first: fa.Sub(t0), idle: idle}, nil
	}
	if _, err := prompt("warm-up prompt"); err != nil {
		return err
	}
	var rs []result
	for i := 0; i < b.o.n; i++ {
		r, err := prompt(fmt.Sprintf("external prompt %d on one session", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("ext", "(ext) bare ACP, same session", rs)
	summaryLine(b.out, b.summary)
	return nil
}
