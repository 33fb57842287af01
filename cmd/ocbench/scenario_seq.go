package main

import (
	"fmt"
)

// seq (a): sequential prompts, new session each and one session.
func (b *bench) seq() error {
	c0 := b.cpu()
	var rs []result
	for i := 0; i < b.o.n; i++ {
		sid, err := b.createSession()
		if err != nil {
			return err
		}
		r, err := b.prompt(sid, fmt.Sprintf("sequential prompt %d on a new session", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("seq_new", "(a) sequential, new session each", rs)
	sid, err := b.createSession()
	if err != nil {
		return err
	}
	rs = rs[:0]
	for i := 0; i < b.o.n; i++ {
		r, err := b.prompt(sid, fmt.Sprintf("sequential prompt %d on one session", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("seq_same", "(a) sequential, same session", rs)
	b.cpuPerPrompt("seq_cpu_ms_per_prompt", "(a) sequential", c0, 2*b.o.n)
	return nil
}
