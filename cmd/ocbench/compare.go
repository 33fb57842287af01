package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// readSummary finds the `SUMMARY {json}` line of an ocbench output file.
func readSummary(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var m map[string]any
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "SUMMARY "); ok {
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				return nil, err
			}
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%s: no SUMMARY line", path)
	}
	return m, sc.Err()
}

// get reads "key" or "key.field" (a stat's median, p99, ...) as a number.
func get(m map[string]any, key string) (float64, bool) {
	k, field, _ := strings.Cut(key, ".")
	v, ok := m[k]
	if !ok {
		return 0, false
	}
	if field != "" {
		o, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		v = o[field]
	}
	f, ok := v.(float64)
	return f, ok
}

type row struct{ name, key, unit string }

var rows = []row{
	{"warm-up prompt: first text", "warmup_first_text_ms", "ms"},
	{"(a) new session each: first text median", "seq_new_first_ms.median", "ms"},
	{"(a) new session each: first text p90", "seq_new_first_ms.p90", "ms"},
	{"(a) new session each: first text p99", "seq_new_first_ms.p99", "ms"},
	{"(a) new session each: idle median", "seq_new_idle_ms.median", "ms"},
	{"(a) same session: first text median", "seq_same_first_ms.median", "ms"},
	{"(a) same session: first text p90", "seq_same_first_ms.p90", "ms"},
	{"(a) same session: first text p99", "seq_same_first_ms.p99", "ms"},
	{"(a) same session: idle median", "seq_same_idle_ms.median", "ms"},
	{"(b) 1 session: first text median", "conc1_first_ms.median", "ms"},
	{"(b) 1 session: first text p99", "conc1_first_ms.p99", "ms"},
	{"(b) 10 sessions: first text median", "conc10_first_ms.median", "ms"},
	{"(b) 10 sessions: first text p99", "conc10_first_ms.p99", "ms"},
	{"(b) 100 sessions: first text median", "conc100_first_ms.median", "ms"},
	{"(b) 100 sessions: first text p99", "conc100_first_ms.p99", "ms"},
	{"(b) 100 sessions: throughput", "conc100_prompts_per_s", "prompts/s"},
	{"(c) /event x50: all saw idle, median", "fanout_event_50_all_idle_ms.median", "ms"},
	{"(c) /event x1000: all saw idle, median", "fanout_event_1000_all_idle_ms.median", "ms"},
	{"(c) /event x1000: all saw idle, max", "fanout_event_1000_all_idle_ms.max", "ms"},
	{"(c) /global/event x50: all saw idle, median", "fanout_global_event_50_all_idle_ms.median", "ms"},
	{"(c) /global/event x1000: all saw idle, median", "fanout_global_event_1000_all_idle_ms.median", "ms"},
	{"(c) /global/event x1000: all saw idle, max", "fanout_global_event_1000_all_idle_ms.max", "ms"},
	{"(d) v2 admissions (steer/queue mix)", "admit_per_s", "/s"},
	{"(d) v2 admission POST median", "admit_post_ms.median", "ms"},
	{"(d) v2 admission POST p99", "admit_post_ms.p99", "ms"},
	{"(e) durable events committed", "durable_per_s", "/s"},
	{"(f) RSS at start", "rss_start_kb", "kB"},
	{"(f) RSS after 1 prompt", "rss_after_1_kb", "kB"},
	{"(f) RSS after 100 prompts", "rss_after_100_kb", "kB"},
	{"(f) RSS with 1000 /event subscribers", "rss_fanout_event_1000_kb", "kB"},
	{"(f) RSS at end", "rss_end_kb", "kB"},
	{"(g) empty session: first text median", "history_empty_first_ms.median", "ms"},
	{"(g) long session: first text median", "history_long_first_ms.median", "ms"},
	{"(g) long session: earlier messages", "history_messages", ""},
	{"(g) long session: fill time", "history_fill_s", "s"},
}

func num(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// compare prints the side-by-side table of ocbench outputs: ours against
// the real server (theirsPath; "" or "-" leaves that table out) with the
// targets, then, when yardPath is set, ours against the yardstick
// (bench/yardstick) with the within-2x targets.
func compare(w io.Writer, oursPath, theirsPath, yardPath string) error {
	ours, err := readSummary(oursPath)
	if err != nil {
		return err
	}
	if theirsPath != "" && theirsPath != "-" {
		theirs, err := readSummary(theirsPath)
		if err != nil {
			return err
		}
		compareOpencode(w, ours, theirs)
	}
	if yardPath != "" {
		yard, err := readSummary(yardPath)
		if err != nil {
			return err
		}
		if theirsPath != "" && theirsPath != "-" {
			fmt.Fprintln(w)
		}
		compareYardstick(w, ours, yard)
	}
	return nil
}

// compareOpencode is the ours:opencode table and the targets.
func compareOpencode(w io.Writer, ours, theirs map[string]any) {
	fmt.Fprintf(w, "| metric | unit | ours | opencode | ours:opencode |\n|---|---|---:|---:|---:|\n")
	for _, r := range rows {
		a, aok := get(ours, r.key)
		b, bok := get(theirs, r.key)
		ratio := "-"
		if aok && bok && b != 0 {
			ratio = fmt.Sprintf("%.3f", a/b)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.name, r.unit, num(a, aok), num(b, bok), ratio)
	}
	fmt.Fprintf(w, "\n| target | measured | met |\n|---|---|---|\n")
	check := func(name string, measured string, ok, known bool) {
		m := "NOT MET"
		if !known {
			m = "n/a"
		} else if ok {
			m = "met"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, measured, m)
	}
	ratioT := func(name, key string, limit float64) {
		a, aok := get(ours, key)
		b, bok := get(theirs, key)
		if !aok || !bok || b == 0 {
			check(name, "-", false, false)
			return
		}
		check(name, fmt.Sprintf("%.2f vs %.2f = 1/%.1f", a, b, b/a), a/b <= limit, true)
	}
	ratioT("prompt_async->first text median <= 1/25 of opencode (same session)", "seq_same_first_ms.median", 1.0/25)
	ratioT("prompt_async->first text median <= 1/25 of opencode (new session each)", "seq_new_first_ms.median", 1.0/25)
	if p99, ok := get(ours, "seq_same_first_ms.p99"); ok {
		med, _ := get(ours, "seq_same_first_ms.median")
		check("first text p99 < 4x our median (same session)", fmt.Sprintf("p99 %.2f ms = %.1fx median %.2f", p99, p99/med, med), p99 < 4*med, true)
	}
	if p99, ok := get(ours, "seq_new_first_ms.p99"); ok {
		med, _ := get(ours, "seq_new_first_ms.median")
		check("first text p99 < 4x our median (new session each)", fmt.Sprintf("p99 %.2f ms = %.1fx median %.2f", p99, p99/med, med), p99 < 4*med, true)
	}
	ratioT("RSS at start <= 1/10", "rss_start_kb", 0.1)
	ratioT("RSS after 100 prompts <= 1/10", "rss_after_100_kb", 0.1)
	ratioT("50-subscriber fan-out (/event) <= 1/20", "fanout_event_50_all_idle_ms.median", 1.0/20)
	ratioT("50-subscriber fan-out (/global/event) <= 1/20", "fanout_global_event_50_all_idle_ms.median", 1.0/20)
	for _, k := range []string{"fanout_event_1000_all_idle_ms", "fanout_global_event_1000_all_idle_ms"} {
		mx, ok := get(ours, k+".max")
		check("1000 subscribers all served < 100 ms ("+strings.TrimSuffix(strings.TrimPrefix(k, "fanout_"), "_1000_all_idle_ms")+", worst round)",
			fmt.Sprintf("%.1f ms", mx), mx < 100, ok)
	}
	if l, ok := get(ours, "history_long_first_ms.median"); ok {
		e, _ := get(ours, "history_empty_first_ms.median")
		n, _ := get(ours, "history_messages")
		check(fmt.Sprintf("%.0f earlier messages within 1.5x of an empty session", n), fmt.Sprintf("%.2f vs %.2f ms = %.2fx", l, e, l/e), l <= 1.5*e, true)
	}
	if c100, ok := get(ours, "conc100_first_ms.median"); ok {
		c1, _ := get(ours, "conc1_first_ms.median")
		check("100 concurrent sessions within 3x of one (first text median)", fmt.Sprintf("%.2f vs %.2f ms = %.1fx", c100, c1, c100/c1), c100 <= 3*c1, true)
	}
}

// yardRows are the metrics the yardstick serves (seq, conc, fanout, rss).
var yardRows = []row{
	{"(a) new session each: first text median", "seq_new_first_ms.median", "ms"},
	{"(a) new session each: first text p99", "seq_new_first_ms.p99", "ms"},
	{"(a) new session each: idle median", "seq_new_idle_ms.median", "ms"},
	{"(a) same session: first text median", "seq_same_first_ms.median", "ms"},
	{"(a) same session: first text p90", "seq_same_first_ms.p90", "ms"},
	{"(a) same session: first text p99", "seq_same_first_ms.p99", "ms"},
	{"(a) same session: idle median", "seq_same_idle_ms.median", "ms"},
	{"(a) server CPU per prompt", "seq_cpu_ms_per_prompt", "ms"},
	{"(b) 1 session: first text median", "conc1_first_ms.median", "ms"},
	{"(b) 10 sessions: first text median", "conc10_first_ms.median", "ms"},
	{"(b) 100 sessions: first text median", "conc100_first_ms.median", "ms"},
	{"(b) 100 sessions: first text p99", "conc100_first_ms.p99", "ms"},
	{"(b) 100 sessions: throughput", "conc100_prompts_per_s", "prompts/s"},
	{"(c) /event x50: all got first text, median", "fanout_event_50_all_first_ms_median", "ms"},
	{"(c) /event x50: all saw idle, median", "fanout_event_50_all_idle_ms.median", "ms"},
	{"(c) /event x50: all saw idle, max", "fanout_event_50_all_idle_ms.max", "ms"},
	{"(c) /event x50: server CPU per prompt", "fanout_event_50_cpu_ms_per_prompt", "ms"},
	{"(c) /event x1000: all saw idle, median", "fanout_event_1000_all_idle_ms.median", "ms"},
	{"(c) /event x1000: all saw idle, max", "fanout_event_1000_all_idle_ms.max", "ms"},
	{"(c) /event x1000: server CPU per prompt", "fanout_event_1000_cpu_ms_per_prompt", "ms"},
	{"(c) /global/event x50: all got first text, median", "fanout_global_event_50_all_first_ms_median", "ms"},
	{"(c) /global/event x50: all saw idle, median", "fanout_global_event_50_all_idle_ms.median", "ms"},
	{"(c) /global/event x50: all saw idle, max", "fanout_global_event_50_all_idle_ms.max", "ms"},
	{"(c) /global/event x50: server CPU per prompt", "fanout_global_event_50_cpu_ms_per_prompt", "ms"},
	{"(c) /global/event x1000: all saw idle, median", "fanout_global_event_1000_all_idle_ms.median", "ms"},
	{"(c) /global/event x1000: all saw idle, max", "fanout_global_event_1000_all_idle_ms.max", "ms"},
	{"(c) /global/event x1000: server CPU per prompt", "fanout_global_event_1000_cpu_ms_per_prompt", "ms"},
	{"(f) RSS at start", "rss_start_kb", "kB"},
	{"(f) RSS after 100 prompts", "rss_after_100_kb", "kB"},
	{"(f) RSS at end", "rss_end_kb", "kB"},
}

// yardTargets are the latencies that should come within 2x of the
// yardstick: the rest is work the path itself cannot avoid.
var yardTargets = []row{
	{"first text median (same session)", "seq_same_first_ms.median", ""},
	{"first text median (new session each)", "seq_new_first_ms.median", ""},
	{"first text p99 (same session)", "seq_same_first_ms.p99", ""},
	{"first text p99 (new session each)", "seq_new_first_ms.p99", ""},
	{"50-subscriber fan-out, all saw idle (/event)", "fanout_event_50_all_idle_ms.median", ""},
	{"50-subscriber fan-out, all saw idle (/global/event)", "fanout_global_event_50_all_idle_ms.median", ""},
}

// compareYardstick is the ours:yardstick table (rows either side measured)
// and the within-2x targets.
func compareYardstick(w io.Writer, ours, yard map[string]any) {
	fmt.Fprintf(w, "| metric | unit | ours | yardstick | ours:yardstick |\n|---|---|---:|---:|---:|\n")
	for _, r := range yardRows {
		a, aok := get(ours, r.key)
		b, bok := get(yard, r.key)
		if !aok && !bok {
			continue
		}
		ratio := "-"
		if aok && bok && b != 0 {
			ratio = fmt.Sprintf("%.2f", a/b)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.name, r.unit, num(a, aok), num(b, bok), ratio)
	}
	fmt.Fprintf(w, "\n| target (ours within 2x of the yardstick) | measured | met |\n|---|---|---|\n")
	for _, t := range yardTargets {
		a, aok := get(ours, t.key)
		b, bok := get(yard, t.key)
		if !aok || !bok || b == 0 {
			fmt.Fprintf(w, "| %s | - | n/a |\n", t.name)
			continue
		}
		met := "NOT MET"
		if a <= 2*b {
			met = "met"
		}
		fmt.Fprintf(w, "| %s | %.2f vs %.2f ms = %.2fx | %s |\n", t.name, a, b, a/b, met)
	}
}
