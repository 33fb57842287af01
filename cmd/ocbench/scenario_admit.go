package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// admit (d, e): v2 prompts with a steer/queue mix from several sessions at
// once; admissions per second, POST latency, then durable events per second
// on /event until every input has been prompted and its step has ended.
func (b *bench) admit() error {
	probe, err := b.createSession()
	if err != nil {
		return err
	}
	st, rb, err := b.post("/api/session/"+probe+"/prompt", map[string]any{"prompt": map[string]any{"text": "v2 probe"}, "delivery": "steer"})
	var ok struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err != nil || st != 200 || json.Unmarshal(rb, &ok) != nil || ok.Data.ID == "" {
		b.printf("(d) v2 POST /api/session/{id}/prompt not available (%d %s): skipped\n", st, trunc(rb))
		b.summary["admit_skipped"] = true
		return nil
	}
	time.Sleep(500 * time.Millisecond)

	sids := make([]string, b.o.admitSess)
	ws := make([]*watcher, len(sids))
	for i := range sids {
		if sids[i], err = b.createSession(); err != nil {
			return err
		}
		ws[i] = b.mon.watch(sids[i])
	}
	defer func() {
		for i, s := range sids {
			b.mon.unwatch(s, ws[i])
		}
	}()
	d0 := b.mon.durable.Load()
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	steer, queue := 0, 0
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, sid := range sids {
		wg.Add(1)
		go func(i int, sid string) {
			defer wg.Done()
			for k := 0; k < b.o.admitN; k++ {
				d := "steer"
				// deterministic mix: queue for the given fraction of prompts
				if k > 0 && float64((k*7919+i)%1000)/1000 < b.o.queueFrac {
					d = "queue"
				}
				t := time.Now()
				st, rb, err := b.post("/api/session/"+sid+"/prompt", map[string]any{"prompt": map[string]any{"text": fmt.Sprintf("admission %d %s", k, d)}, "delivery": d})
				el := time.Since(t)
				mu.Lock()
				if err == nil && st != 200 {
					err = fmt.Errorf("v2 prompt: %d %s", st, trunc(rb))
				}
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				lat = append(lat, el)
				if d == "queue" {
					queue++
				} else {
					steer++
				}
				mu.Unlock()
			}
		}(i, sid)
	}
	wg.Wait()
	admitWall := time.Since(t0)
	if firstErr != nil {
		return firstErr
	}
	n := len(lat)
	ls := stats(lat)
	rate := float64(n) / admitWall.Seconds()
	b.printf("(d) %d v2 admissions (%d steer, %d queue) from %d sessions in %.3f s: %.0f admissions/s; POST latency %s\n",
		n, steer, queue, len(sids), admitWall.Seconds(), rate, ls)
	b.summary["admit_per_s"] = rate
	b.summary["admit_post_ms"] = ls
	b.summary["admit_n"] = n
	// drain: every input prompted and a step ended after the last one
	deadline := time.Now().Add(3 * time.Minute)
	drained := false
	for time.Now().Before(deadline) {
		all := true
		for _, w := range ws {
			w.mu.Lock()
			if w.prompted < b.o.admitN || !w.endedLast {
				all = false
			}
			w.mu.Unlock()
		}
		if all {
			drained = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	wall := time.Since(t0)
	var last time.Time
	prompted := 0
	for _, w := range ws {
		w.mu.Lock()
		if w.lastEvent.After(last) {
			last = w.lastEvent
		}
		prompted += w.prompted
		w.mu.Unlock()
	}
	if !last.IsZero() && drained {
		wall = last.Sub(t0)
	}
	durable := b.mon.durable.Load() - d0
	drate := float64(durable) / wall.Seconds()
	b.printf("(e) %d durable session.next.* events on /event in %.3f s (admission start -> drained=%v, %d/%d prompted): %.0f durable events/s\n",
		durable, wall.Seconds(), drained, prompted, n, drate)
	b.summary["durable_events"] = durable
	b.summary["durable_per_s"] = drate
	b.summary["admit_drain_s"] = wall.Seconds()
	b.summary["admit_drained"] = drained
	b.prompts.Add(int64(n))
	// let stragglers (session.idle, titles) settle before the next scenario
	time.Sleep(500 * time.Millisecond)
	return nil
}
