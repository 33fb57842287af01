// Latency statistics and the SUMMARY line.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func stats(ds []time.Duration) stat {
	if len(ds) == 0 {
		return stat{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	pct := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1 // nearest rank
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	med := ms(s[len(s)/2])
	if len(s)%2 == 0 {
		med = (ms(s[len(s)/2-1]) + ms(s[len(s)/2])) / 2
	}
	return stat{N: len(s), Median: med, P90: pct(0.90), P99: pct(0.99), Min: ms(s[0]), Max: ms(s[len(s)-1])}
}

func (s stat) String() string {
	return fmt.Sprintf("median %.2f ms, p90 %.2f, p99 %.2f, min %.2f, max %.2f (n=%d)", s.Median, s.P90, s.P99, s.Min, s.Max, s.N)
}

func (b *bench) report(key, what string, rs []result) {
	var f, i []time.Duration
	for _, r := range rs {
		f = append(f, r.first)
		i = append(i, r.idle)
	}
	fs, is := stats(f), stats(i)
	b.printf("%s: prompt_async -> first text: %s\n", what, fs)
	b.printf("%s: prompt_async -> session.idle: %s\n", what, is)
	b.summary[key+"_first_ms"] = fs
	b.summary[key+"_idle_ms"] = is
}

// summaryLine writes the line `SUMMARY {json}` that ends the output; -compare,
// bench/compare.sh and bench/profile.sh read it.
func summaryLine(w io.Writer, summary map[string]any) {
	js, _ := json.Marshal(summary)
	fmt.Fprintf(w, "SUMMARY %s\n", js)
}
