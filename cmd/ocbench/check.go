package main

import (
	"fmt"
	"io"
)

// guard is one limit of `make bench-check` (issue 35's floor): a ratio of
// ours to the yardstick's figure measured in the same run, or an absolute
// bound of ours.
type guard struct {
	name, key string
	ratio     bool // max is ours/yardstick, else ours itself
	max       float64
	unit      string
}

var guards = []guard{
	{"prompt_async -> first text, median (new session each)", "seq_new_first_ms.median", true, 2, "ms"},
	{"prompt_async -> first text, median (same session)", "seq_same_first_ms.median", true, 2, "ms"},
	{"prompt_async -> session.idle, median (same session)", "seq_same_idle_ms.median", true, 2, "ms"},
	{"/event x50: all saw idle, median", "fanout_event_50_all_idle_ms.median", true, 2, "ms"},
	{"server CPU per prompt", "seq_cpu_ms_per_prompt", true, 2, "ms"},
	{"RSS at start", "rss_start_kb", false, 15 * 1024, "kB"},
	{"8 MiB prompt: peak RSS growth, times its size", "big_growth_x", false, 8, "x"},
}

// check prints each guard's figures and whether it holds; it returns how
// many do not (a figure missing from either run counts as failing: a
// guard that cannot be measured does not pass).
func check(w io.Writer, oursPath, yardPath string) (int, error) {
	ours, err := readSummary(oursPath)
	if err != nil {
		return 0, err
	}
	yard, err := readSummary(yardPath)
	if err != nil {
		return 0, err
	}
	failed := 0
	fmt.Fprintf(w, "| guard | ours | yardstick | figure | limit | |\n|---|---:|---:|---:|---:|---|\n")
	for _, g := range guards {
		o, ok := get(ours, g.key)
		y, yok := get(yard, g.key)
		fig, limit, verdict := "-", "", "missing"
		switch {
		case !ok:
		case g.ratio && (!yok || y <= 0):
			verdict = "missing (yardstick)"
		case g.ratio:
			fig, limit = fmt.Sprintf("%.2fx", o/y), fmt.Sprintf("%.0fx", g.max)
			if o/y <= g.max {
				verdict = "ok"
			} else {
				verdict = "OVER"
			}
		default:
			fig, limit = num(o, true)+" "+g.unit, num(g.max, true)+" "+g.unit
			if o <= g.max {
				verdict = "ok"
			} else {
				verdict = "OVER"
			}
		}
		if verdict != "ok" {
			failed++
		}
		yv := "-"
		if g.ratio {
			yv = num(y, yok)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", g.name, num(o, ok), yv, fig, limit, verdict)
	}
	return failed, nil
}
