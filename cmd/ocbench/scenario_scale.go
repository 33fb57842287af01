package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// scale: several instances sharing one database (-urls). Worker w creates
// its session on instance w (round-robin), prompts it through instance w+1
// (so with two or more instances every prompt is forwarded to the owner)
// and times it on the /event stream of instance w+2: with three instances
// that is neither the creator nor the prompting one, so the text delta and
// session.idle arrive there through the relay. A turn completes at
// session.idle. Prompts/s counts completed turns of all workers over the
// run's wall time; first text is POST -> first message.part.delta.
func (b *bench) scale() error {
	urls := b.scaleURLs()
	n := len(urls)
	peers := make([]*bench, n)
	mons := make([]*monitor, n)
	for i, u := range urls {
		if u == b.base && b.mon != nil {
			peers[i], mons[i] = b, b.mon
			continue
		}
		p := &bench{o: b.o, base: u, hc: b.hc, sc: b.sc, out: b.out, summary: map[string]any{}}
		if err := p.waitHealthy(); err != nil {
			return err
		}
		m, err := p.openMonitor("/event")
		if err != nil {
			return fmt.Errorf("monitor %s/event: %w", u, err)
		}
		defer m.close()
		peers[i], mons[i] = p, m
	}
	k := max(1, b.o.scaleWorkers)
	sids := make([]string, k)
	for w := range sids {
		var err error
		if sids[w], err = peers[w%n].createSession(); err != nil {
			return fmt.Errorf("scale: create on %s: %w", urls[w%n], err)
		}
	}
	var mu sync.Mutex
	var firsts, idles []time.Duration
	var errs []string
	nerr, noText := 0, 0
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(b.o.scaleDur)
	for w := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			poster, mon := peers[(w+1)%n], mons[(w+2)%n]
			for i := 0; time.Now().Before(deadline); i++ {
				r, err := b.promptVia(poster, mon, sids[w], fmt.Sprintf("scale prompt %d of worker %d", i, w))
				mu.Lock()
				if err != nil {
					nerr++
					if len(errs) < 5 {
						errs = append(errs, fmt.Sprintf("%s (%s %s): %v", time.Since(t0).Round(time.Millisecond), poster.base, sids[w], err))
					}
					mu.Unlock()
					time.Sleep(100 * time.Millisecond)
					continue
				}
				firsts = append(firsts, r.first)
				idles = append(idles, r.idle)
				if r.noText {
					noText++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	rate := float64(len(idles)) / wall.Seconds()
	f50, f95 := percentile(firsts, 0.50), percentile(firsts, 0.95)
	i50, i95 := percentile(idles, 0.50), percentile(idles, 0.95)
	b.printf("(scale) %d instance(s) %s, %d workers, %s: %d turns in %.2f s = %.1f prompts/s\n",
		n, strings.Join(urls, ","), k, b.o.scaleDur, len(idles), wall.Seconds(), rate)
	b.printf("(scale) prompt_async -> first text: p50 %.2f ms, p95 %.2f ms, max %.2f; -> session.idle: p50 %.2f ms, p95 %.2f ms, max %.2f\n",
		f50, f95, percentile(firsts, 1), i50, i95, percentile(idles, 1))
	b.printf("(scale) errors: %d; turns with no text delta seen before session.idle: %d\n", nerr, noText)
	for _, e := range errs {
		b.printf("(scale) error: %s\n", e)
	}
	// One markdown row for bench/scaleout.sh.
	b.printf("SCALEROW | %s | %.1f | %.2f | %.2f | %d |\n", b.o.label, rate, f50, f95, nerr)
	b.summary["scale_instances"] = n
	b.summary["scale_workers"] = k
	b.summary["scale_turns"] = len(idles)
	b.summary["scale_prompts_per_s"] = rate
	b.summary["scale_first_p50_ms"] = f50
	b.summary["scale_first_p95_ms"] = f95
	b.summary["scale_idle_p50_ms"] = i50
	b.summary["scale_idle_p95_ms"] = i95
	b.summary["scale_errors"] = nerr
	b.summary["scale_no_text"] = noText
	return nil
}

// scaleURLs is -urls, or just -url.
func (b *bench) scaleURLs() []string {
	var us []string
	for _, u := range strings.Split(b.o.urls, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			us = append(us, u)
		}
	}
	if len(us) == 0 {
		us = []string{b.base}
	}
	return us
}

// percentile is the nearest-rank p-quantile in ms (0 for no samples).
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := int(p*float64(len(s))+0.999999) - 1
	return ms(s[max(0, min(i, len(s)-1))])
}
