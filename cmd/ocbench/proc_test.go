package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProcWithoutPid(t *testing.T) {
	var out strings.Builder
	b := newBench(options{url: "http://127.0.0.1:4096"})
	b.out = &out
	b.sampleRSS("rss_start_kb", "at start")
	b.cpuPerPrompt("seq_cpu_ms_per_prompt", "(a) sequential", 0, 10)
	if b.rss() != 0 || b.cpu() != 0 || out.Len() != 0 || len(b.summary) != 2 {
		t.Errorf("without -pid: rss %d, cpu %v, output %q, summary %v; want nothing", b.rss(), b.cpu(), out.String(), b.summary)
	}
}

func TestProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	var out strings.Builder
	b := newBench(options{url: "http://127.0.0.1:4096", pid: os.Getpid()})
	b.out = &out
	for t0 := time.Now(); b.cpu() == 0 && time.Since(t0) < 10*time.Second; { // spin until a tick of CPU shows
	}
	if c := b.cpu(); c <= 0 || c%(10*time.Millisecond) != 0 {
		t.Errorf("cpu() = %v, want > 0 in 10 ms ticks", c)
	}
	b.sampleRSS("rss_start_kb", "at start")
	v, ok := b.summary["rss_start_kb"].(int64)
	if !ok || v <= 0 {
		t.Fatalf("rss_start_kb = %#v, want a positive int64", b.summary["rss_start_kb"])
	}
	if got, want := out.String(), fmt.Sprintf("RSS at start: %d kB (%.1f MB)\n", v, float64(v)/1024); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	out.Reset()
	b.cpuPerPrompt("seq_cpu_ms_per_prompt", "(a) sequential", b.cpu()-40*time.Millisecond, 4)
	c, ok := b.summary["seq_cpu_ms_per_prompt"].(float64)
	if !ok || c < 10 {
		t.Fatalf("seq_cpu_ms_per_prompt = %#v, want >= 10 (40 ms or more over 4 prompts)", b.summary["seq_cpu_ms_per_prompt"])
	}
	if got, want := out.String(), fmt.Sprintf("(a) sequential: server CPU %.2f ms per prompt (4 prompts)\n", c); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
