// HTTP requests to the server under test: health, sessions, prompts.

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

func (b *bench) waitHealthy() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := b.hc.Get(b.base + "/global/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server %s not healthy: %v", b.base, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *bench) post(path string, body any) (int, []byte, error) {
	js, _ := json.Marshal(body)
	resp, err := b.hc.Post(b.base+path, "application/json", bytes.NewReader(js))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp.StatusCode, rb, err
}

func (b *bench) createSession() (string, error) {
	st, rb, err := b.post("/session", map[string]any{})
	if err != nil {
		return "", err
	}
	var s struct {
		ID string `json:"id"`
	}
	if st/100 != 2 || json.Unmarshal(rb, &s) != nil || s.ID == "" {
		return "", fmt.Errorf("POST /session: %d %s", st, trunc(rb))
	}
	return s.ID, nil
}

func (b *bench) promptAsync(sid, text string, noReply bool) error {
	body := map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}}
	if noReply {
		body["noReply"] = true
	}
	if b.o.agent != "" {
		body["agent"] = b.o.agent
	}
	st, rb, err := b.post("/session/"+sid+"/prompt_async", body)
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return fmt.Errorf("prompt_async: %d %s", st, trunc(rb))
	}
	return nil
}

func trunc(b []byte) string {
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// result is one prompt's latencies from the POST; noText: no text delta
// arrived before session.idle (first is then idle).
type result struct {
	first, idle time.Duration
	noText      bool
}

// prompt sends prompt_async and waits for the session's first
// message.part.delta and session.idle on the monitor /event stream.
func (b *bench) prompt(sid, text string) (result, error) { return b.promptVia(b, b.mon, sid, text) }

// promptVia is prompt with the POST sent to poster's server and the events
// read on mon (another instance's stream, in the scale scenario).
func (b *bench) promptVia(poster *bench, mon *monitor, sid, text string) (result, error) {
	w := mon.watch(sid)
	defer mon.unwatch(sid, w)
	t0 := time.Now()
	w.start = t0
	if err := poster.promptAsync(sid, text, false); err != nil {
		return result{}, err
	}
	select {
	case <-w.idle:
	case <-time.After(b.o.timeout):
		return result{}, fmt.Errorf("session %s: no session.idle within %s", sid, b.o.timeout)
	}
	b.prompts.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	r := result{idle: w.idleAt.Sub(t0)}
	if !w.firstAt.IsZero() {
		r.first = w.firstAt.Sub(t0)
	} else {
		r.first, r.noText = r.idle, true
	}
	return r, nil
}

func (b *bench) promptAsyncStr(sid, text string) error { return b.promptAsync(sid, text, false) }
