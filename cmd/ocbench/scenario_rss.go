package main

import (
	"fmt"
	"time"
)

// fill (f): brings the number of prompts to -rss-prompts and samples RSS.
func (b *bench) fill() error {
	need := int64(b.o.rssPrompts) - b.prompts.Load()
	if need > 0 {
		sid, err := b.createSession()
		if err != nil {
			return err
		}
		t0 := time.Now()
		for i := int64(0); i < need; i++ {
			if _, err := b.prompt(sid, fmt.Sprintf("filler prompt %d", i)); err != nil {
				return err
			}
		}
		b.printf("%d filler prompts took %.1f s\n", need, time.Since(t0).Seconds())
	}
	b.sampleRSS("rss_after_100_kb", fmt.Sprintf("after %d prompts", b.prompts.Load()))
	b.summary["rss_after_prompts"] = b.prompts.Load()
	return nil
}
