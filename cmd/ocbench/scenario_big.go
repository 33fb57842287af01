package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// big (b): one prompt of -big-mb MiB through POST /session/{id}/message,
// its answer awaited, and the server's peak RSS growth over it: VmHWM after
// minus VmRSS before, the peak reset first (/proc/PID/clear_refs 5) so an
// earlier scenario's peak does not count. The prompt asks the stub model
// (or the built-in one, set with --scripted-reply) for a short answer, so
// what grows is what the prompt itself costs.
func (b *bench) big() error {
	if b.o.pid == 0 {
		return fmt.Errorf("big: needs -pid (the server's RSS)")
	}
	sid, err := b.createSession()
	if err != nil {
		return err
	}
	size := b.o.bigMB << 20
	var sb strings.Builder
	sb.Grow(size)
	sb.WriteString("reply: ok, got it\n")
	for sb.Len() < size {
		sb.WriteString("lorem ipsum dolor sit amet, consectetur adipiscing elit ")
	}
	text := sb.String()[:size]
	// A clean peak: 5 resets VmHWM to the current RSS (Linux >= 4.0).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", b.o.pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("big: reset the server's peak RSS: %w", err)
	}
	before := b.rss()
	t0 := time.Now()
	st, rb, err := b.post("/session/"+sid+"/message", map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}})
	took := time.Since(t0)
	if err != nil || st != 200 {
		return fmt.Errorf("big: POST /message: %d %s %v", st, trunc(rb), err)
	}
	peak := b.procStatus("VmHWM")
	growth := peak - before
	x := float64(growth) / float64(size>>10)
	b.summary["big_prompt_mb"] = b.o.bigMB
	b.summary["big_growth_kb"] = growth
	b.summary["big_growth_x"] = x
	b.summary["big_s"] = took.Seconds()
	b.printf("big prompt: %d MiB, answered in %.2f s, peak RSS growth %.1f MB = %.1fx its size\n",
		b.o.bigMB, took.Seconds(), float64(growth)/1024, x)
	return nil
}

// procStatus is a kB field of the server's /proc/PID/status (0 if absent).
func (b *bench) procStatus(field string) int64 {
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.o.pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(f), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			if fs := strings.Fields(rest); len(fs) > 0 {
				v, _ := strconv.ParseInt(fs[0], 10, 64)
				return v
			}
		}
	}
	return 0
}
