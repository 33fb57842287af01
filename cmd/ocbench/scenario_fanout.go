package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fanout (c): S subscribers on /event or /global/event; time from
// prompt_async until the last one has seen the prompt's session.idle.
type fanRound struct {
	sid       string
	start     time.Time
	firsts    []time.Duration
	idles     []time.Duration
	remaining atomic.Int32
	done      chan struct{}
}

func (b *bench) fanout() error {
	for _, path := range strings.Split(b.o.fanPaths, ",") {
		path = strings.TrimSpace(path)
		for _, ss := range strings.Split(b.o.subs, ",") {
			s, err := strconv.Atoi(strings.TrimSpace(ss))
			if err != nil || s < 1 {
				continue
			}
			if err := b.fanoutOne(path, s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) fanoutOne(path string, s int) error {
	var cur atomic.Pointer[fanRound]
	conns := make([]*sseConn, s)
	var mu sync.Mutex
	var openErr error
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < s; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := b.openSSEWith(b.subClient(i), path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if openErr == nil {
					openErr = err
				}
				return
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.body.Close()
			}
		}
	}
	if openErr != nil {
		closeAll()
		return fmt.Errorf("fan-out %s x%d: %w", path, s, openErr)
	}
	b.printf("(c) %d subscribers on %s connected in %.2f s\n", s, path, time.Since(t0).Seconds())
	var readers sync.WaitGroup
	for i, c := range conns {
		readers.Add(1)
		go func(i int, c *sseConn) {
			defer readers.Done()
			var seenFirst, seenIdle *fanRound
			c.each(func(line []byte, now time.Time) bool {
				r := cur.Load()
				if r == nil || seenIdle == r {
					return true
				}
				typ, sid := parseFrame(line)
				if sid != r.sid {
					return true
				}
				switch typ {
				case "message.part.delta":
					if seenFirst != r {
						seenFirst = r
						r.firsts[i] = now.Sub(r.start)
					}
				case "session.idle":
					seenIdle = r
					r.idles[i] = now.Sub(r.start)
					if seenFirst != r {
						r.firsts[i] = r.idles[i]
					}
					if r.remaining.Add(-1) == 0 {
						close(r.done)
					}
				}
				return true
			})
		}(i, c)
	}
	time.Sleep(200 * time.Millisecond)
	key := fmt.Sprintf("fanout_%s_%d", strings.ReplaceAll(strings.Trim(path, "/"), "/", "_"), s)
	if v := b.rss(); v > 0 {
		b.summary["rss_"+key+"_kb"] = v
		b.printf("RSS with %d subscribers on %s: %d kB (%.1f MB)\n", s, path, v, float64(v)/1024)
	}
	var alls, allFirst, medSub []time.Duration
	var err error
	c0 := b.cpu()
	for round := 0; round < b.o.fanRounds; round++ {
		sid, e := b.createSession()
		if e != nil {
			err = e
			break
		}
		r := &fanRound{sid: sid, firsts: make([]time.Duration, s), idles: make([]time.Duration, s), done: make(chan struct{})}
		r.remaining.Store(int32(s))
		w := b.mon.watch(sid)
		r.start = time.Now()
		w.start = r.start
		cur.Store(r)
		if e := b.promptAsyncStr(sid, fmt.Sprintf("fan-out prompt %d", round)); e != nil {
			err = e
			break
		}
		select {
		case <-r.done:
		case <-time.After(b.o.timeout):
			err = fmt.Errorf("fan-out %s x%d: only %d of %d subscribers saw session.idle within %s", path, s, s-int(r.remaining.Load()), s, b.o.timeout)
		}
		<-w.idle
		b.mon.unwatch(sid, w)
		b.prompts.Add(1)
		if err != nil {
			break
		}
		is, fs := stats(r.idles), stats(r.firsts)
		b.printf("(c) %s x%d round %d: all got first text by %.1f ms, all got session.idle by %.1f ms (median sub %.1f, min %.1f)\n",
			path, s, round, fs.Max, is.Max, is.Median, is.Min)
		alls = append(alls, time.Duration(is.Max*float64(time.Millisecond)))
		allFirst = append(allFirst, time.Duration(fs.Max*float64(time.Millisecond)))
		medSub = append(medSub, time.Duration(is.Median*float64(time.Millisecond)))
		time.Sleep(100 * time.Millisecond)
	}
	cur.Store(nil)
	closeAll()
	readers.Wait()
	if err != nil {
		return err
	}
	st := stats(alls)
	b.printf("(c) %s x%d: POST -> ALL subscribers saw session.idle: %s; all got first text median %.1f ms\n", path, s, st, stats(allFirst).Median)
	b.summary[key+"_all_idle_ms"] = st
	b.summary[key+"_all_first_ms_median"] = stats(allFirst).Median
	b.summary[key+"_median_sub_idle_ms"] = stats(medSub).Median
	b.cpuPerPrompt(key+"_cpu_ms_per_prompt", fmt.Sprintf("(c) %s x%d", path, s), c0, len(alls))
	return nil
}
