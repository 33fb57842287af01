package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// openaiScenario (issue 34): the OpenAI door against prompt_async, on the
// same server and stub, prompt for prompt in turn (each first every other
// time, so load on the machine hits both alike). Each series is one
// session: streamed POST /v1/responses chained by previous_response_id
// (first text = the first response.output_text.delta on its own stream,
// completion = response.completed) and prompt_async (first
// message.part.delta and session.idle on /event, as seq measures). The
// ratios of the medians are what the door costs.
func (b *bench) openaiScenario() error {
	sid, err := b.createSession()
	if err != nil {
		return err
	}
	var prev string
	var rs, prs []result
	for i := 0; i < b.o.n; i++ {
		text := fmt.Sprintf("openai door prompt %d on one session", i)
		viaOpenAI := func() error {
			r, id, err := b.streamResponse(prev, text)
			if err != nil {
				return err
			}
			prev = id
			rs = append(rs, r)
			return nil
		}
		viaPrompt := func() error {
			r, err := b.prompt(sid, text)
			if err != nil {
				return err
			}
			prs = append(prs, r)
			return nil
		}
		first, second := viaOpenAI, viaPrompt
		if i%2 == 1 {
			first, second = viaPrompt, viaOpenAI
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	b.report("openai", "(openai) streamed /v1/responses, same session", rs)
	b.report("openai_prompt", "(openai) prompt_async beside it, same session", prs)
	med := func(rs []result, idle bool) float64 {
		var ds []time.Duration
		for _, r := range rs {
			ds = append(ds, map[bool]time.Duration{false: r.first, true: r.idle}[idle])
		}
		return stats(ds).Median
	}
	if p, pi := med(prs, false), med(prs, true); p > 0 && pi > 0 {
		first, done := med(rs, false)/p, med(rs, true)/pi
		b.summary["openai_first_ratio"] = first
		b.summary["openai_done_ratio"] = done
		b.printf("(openai) /v1/responses : prompt_async, medians: first text %.2f×, completion %.2f×\n", first, done)
	}
	return nil
}

// streamResponse posts a streamed /v1/responses (continuing prev when
// set) and reads its stream to response.completed.
func (b *bench) streamResponse(prev, text string) (result, string, error) {
	body := map[string]any{"input": text, "stream": true}
	if prev != "" {
		body["previous_response_id"] = prev
	}
	if b.o.agent != "" {
		body["model"] = b.o.agent
	}
	js, _ := json.Marshal(body)
	t0 := time.Now()
	req, _ := http.NewRequest("POST", b.base+"/v1/responses", bytes.NewReader(js))
	req.Header.Set("Content-Type", "application/json")
	// The keep-alive client, as prompt_async is sent with (b.sc keeps no
	// idle connection: a new one per request would be measured too).
	resp, err := b.hc.Do(req)
	if err != nil {
		return result{}, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return result{}, "", fmt.Errorf("POST /v1/responses: %d", resp.StatusCode)
	}
	c := &sseConn{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}
	var r result
	var id string
	done := false
	c.each(func(line []byte, now time.Time) bool {
		switch typ := strField(line, kType); typ {
		case "response.created":
			id = strField(line, []byte(`"id":"`))
		case "response.output_text.delta":
			if r.first == 0 {
				r.first = now.Sub(t0)
			}
		case "response.completed", "response.failed", "response.incomplete":
			r.idle, done = now.Sub(t0), typ == "response.completed"
			return false
		}
		return true
	})
	if !done || id == "" {
		return result{}, "", fmt.Errorf("POST /v1/responses: the stream ended without response.completed (id %q)", id)
	}
	b.prompts.Add(1)
	if r.first == 0 {
		r.first, r.noText = r.idle, true
	}
	return r, id, nil
}
