package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// historyScenario (g): latency on a session with many earlier messages
// (created with noReply prompt_async) vs an empty session.
func (b *bench) historyScenario() error {
	base, err := b.createSession()
	if err != nil {
		return err
	}
	var rs []result
	for i := 0; i < b.o.historyN; i++ {
		r, err := b.prompt(base, fmt.Sprintf("empty-session prompt %d", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("history_empty", "(g) empty session", rs)

	sid, err := b.createSession()
	if err != nil {
		return err
	}
	w := b.mon.watch(sid)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	t0 := time.Now()
	stop := t0.Add(b.o.historyMax)
	var wg sync.WaitGroup
	for p := 0; p < b.o.historyPar; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := next.Add(1)
				if k > int64(b.o.history) || time.Now().After(stop) || failed.Load() != nil {
					return
				}
				if err := b.promptAsync(sid, fmt.Sprintf("earlier message %d", k), true); err != nil {
					failed.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return fmt.Errorf("history fill: %w", *e)
	}
	filled := min(next.Load()-1, int64(b.o.history))
	// settle: no more events for the session for 1 s
	for {
		w.mu.Lock()
		quiet := time.Since(w.lastEvent) > time.Second
		w.mu.Unlock()
		if quiet {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.mon.unwatch(sid, w)
	fill := time.Since(t0)
	b.printf("(g) filled %d earlier messages (noReply prompt_async, %d parallel) in %.1f s (%.0f/s)\n", filled, b.o.historyPar, fill.Seconds(), float64(filled)/fill.Seconds())
	b.summary["history_messages"] = filled
	b.summary["history_fill_s"] = fill.Seconds()
	b.sampleRSS("rss_after_history_kb", "after filling history")
	rs = rs[:0]
	for i := 0; i < b.o.historyN; i++ {
		r, err := b.prompt(sid, fmt.Sprintf("long-history prompt %d", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("history_long", fmt.Sprintf("(g) session with %d earlier messages", filled), rs)
	return nil
}
