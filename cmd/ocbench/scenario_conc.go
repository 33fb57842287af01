package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// concurrency (b): c sessions, each running -conc-n sequential prompts.
func (b *bench) concurrency() error {
	for _, cs := range strings.Split(b.o.conc, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || c < 1 {
			continue
		}
		sids := make([]string, c)
		for i := range sids {
			if sids[i], err = b.createSession(); err != nil {
				return err
			}
		}
		var mu sync.Mutex
		var rs []result
		var firstErr error
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := 0; i < c; i++ {
			wg.Add(1)
			go func(sid string) {
				defer wg.Done()
				for k := 0; k < b.o.concN; k++ {
					r, err := b.prompt(sid, fmt.Sprintf("concurrent prompt %d", k))
					mu.Lock()
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
					rs = append(rs, r)
					mu.Unlock()
				}
			}(sids[i])
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		wall := time.Since(t0)
		b.report(fmt.Sprintf("conc%d", c), fmt.Sprintf("(b) %d concurrent sessions x %d prompts", c, b.o.concN), rs)
		b.printf("(b) %d concurrent sessions: %d prompts in %.2f s (%.1f prompts/s)\n", c, len(rs), wall.Seconds(), float64(len(rs))/wall.Seconds())
		b.summary[fmt.Sprintf("conc%d_prompts_per_s", c)] = float64(len(rs)) / wall.Seconds()
	}
	return nil
}
