package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func msList(vs ...float64) []time.Duration {
	ds := make([]time.Duration, len(vs))
	for i, v := range vs {
		ds[i] = time.Duration(v * float64(time.Millisecond))
	}
	return ds
}

func seqMs(n int) []time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[n-1-i] = time.Duration(i+1) * time.Millisecond // descending: stats must sort
	}
	return ds
}

func TestMs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{
		{0, 0},
		{time.Millisecond, 1},
		{2500 * time.Microsecond, 2.5},
		{1500 * time.Nanosecond, 0.001},
		{999 * time.Nanosecond, 0}, // below a microsecond is cut off
		{3 * time.Second, 3000},
	} {
		if got := ms(tc.d); got != tc.want {
			t.Errorf("ms(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}

func TestStats(t *testing.T) {
	cases := []struct {
		name string
		in   []time.Duration
		want stat
	}{
		{"nil", nil, stat{}},
		{"empty", []time.Duration{}, stat{}},
		{"one", msList(7), stat{N: 1, Median: 7, P90: 7, P99: 7, Min: 7, Max: 7}},
		{"odd n: the middle one", msList(5, 1, 4, 2, 3), stat{N: 5, Median: 3, P90: 5, P99: 5, Min: 1, Max: 5}},
		{"even n: mean of the two middle ones", msList(4, 1, 3, 2), stat{N: 4, Median: 2.5, P90: 4, P99: 4, Min: 1, Max: 4}},
		{"two", msList(10, 1), stat{N: 2, Median: 5.5, P90: 10, P99: 10, Min: 1, Max: 10}},
		// nearest rank: the ceil(p*n)-th smallest
		{"1..6: rank 5.4 rounds up", seqMs(6), stat{N: 6, Median: 3.5, P90: 6, P99: 6, Min: 1, Max: 6}},
		{"1..10", seqMs(10), stat{N: 10, Median: 5.5, P90: 9, P99: 10, Min: 1, Max: 10}},
		{"1..11", seqMs(11), stat{N: 11, Median: 6, P90: 10, P99: 11, Min: 1, Max: 11}},
		{"1..16: rank 14.4 rounds up", seqMs(16), stat{N: 16, Median: 8.5, P90: 15, P99: 16, Min: 1, Max: 16}},
		{"1..100", seqMs(100), stat{N: 100, Median: 50.5, P90: 90, P99: 99, Min: 1, Max: 100}},
		{"1..200", seqMs(200), stat{N: 200, Median: 100.5, P90: 180, P99: 198, Min: 1, Max: 200}},
		{"1..1000", seqMs(1000), stat{N: 1000, Median: 500.5, P90: 900, P99: 990, Min: 1, Max: 1000}},
		{"duplicates", msList(2, 2, 9, 2), stat{N: 4, Median: 2, P90: 9, P99: 9, Min: 2, Max: 9}},
		{"sub-millisecond", msList(1.5, 0.5, 2.25), stat{N: 3, Median: 1.5, P90: 2.25, P99: 2.25, Min: 0.5, Max: 2.25}},
		{"one outlier in 100: p99 stays below it", append(msList(1000), seqMs(99)...),
			stat{N: 100, Median: 50.5, P90: 90, P99: 99, Min: 1, Max: 1000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.in...)
			if got := stats(in); got != tc.want {
				t.Errorf("stats = %+v\n     want %+v", got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("stats reordered its input: %v", in)
				}
			}
		})
	}
}

func TestStatText(t *testing.T) {
	s := stats(msList(3, 1, 2.5, 10))
	if got, want := s.String(), "median 2.75 ms, p90 10.00, p99 10.00, min 1.00, max 10.00 (n=4)"; got != want {
		t.Errorf("String() = %q\n        want %q", got, want)
	}
	js, _ := json.Marshal(s)
	if got, want := string(js), `{"n":4,"median":2.75,"p90":10,"p99":10,"min":1,"max":10}`; got != want {
		t.Errorf("JSON %s\nwant %s", got, want)
	}
	if got, want := (stat{}).String(), "median 0.00 ms, p90 0.00, p99 0.00, min 0.00, max 0.00 (n=0)"; got != want {
		t.Errorf("empty String() = %q, want %q", got, want)
	}
}

// TestReportAndSummary checks the text lines of report and the SUMMARY line
// for a small known run, and that -compare reads that line back.
func TestReportAndSummary(t *testing.T) {
	var out strings.Builder
	b := newBench(options{url: "http://127.0.0.1:4096", label: "ours"})
	b.out = &out
	b.report("seq_new", "(a) sequential, new session each", []result{
		{first: 3 * time.Millisecond, idle: 30 * time.Millisecond},
		{first: 1 * time.Millisecond, idle: 10 * time.Millisecond},
		{first: 2 * time.Millisecond, idle: 20 * time.Millisecond},
	})
	b.report("history_empty", "(g) empty session", nil)
	b.summary["prompts_total"] = int64(3)
	b.summary["admit_drained"] = true
	b.summary["wall_s"] = 1.25
	summaryLine(&out, b.summary)

	want := "(a) sequential, new session each: prompt_async -> first text: median 2.00 ms, p90 3.00, p99 3.00, min 1.00, max 3.00 (n=3)\n" +
		"(a) sequential, new session each: prompt_async -> session.idle: median 20.00 ms, p90 30.00, p99 30.00, min 10.00, max 30.00 (n=3)\n" +
		"(g) empty session: prompt_async -> first text: median 0.00 ms, p90 0.00, p99 0.00, min 0.00, max 0.00 (n=0)\n" +
		"(g) empty session: prompt_async -> session.idle: median 0.00 ms, p90 0.00, p99 0.00, min 0.00, max 0.00 (n=0)\n" +
		`SUMMARY {"admit_drained":true,` +
		`"history_empty_first_ms":{"n":0,"median":0,"p90":0,"p99":0,"min":0,"max":0},` +
		`"history_empty_idle_ms":{"n":0,"median":0,"p90":0,"p99":0,"min":0,"max":0},` +
		`"label":"ours","prompts_total":3,` +
		`"seq_new_first_ms":{"n":3,"median":2,"p90":3,"p99":3,"min":1,"max":3},` +
		`"seq_new_idle_ms":{"n":3,"median":20,"p90":30,"p99":30,"min":10,"max":30},` +
		`"url":"http://127.0.0.1:4096","wall_s":1.25}` + "\n"
	if got := out.String(); got != want {
		t.Errorf("output\n%s\nwant\n%s", got, want)
	}

	p := filepath.Join(t.TempDir(), "ours.txt")
	if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readSummary(p)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]float64{
		"seq_new_first_ms.median": 2, "seq_new_first_ms.p90": 3, "seq_new_idle_ms.max": 30,
		"prompts_total": 3, "wall_s": 1.25, "history_empty_idle_ms.n": 0,
	} {
		if got, ok := get(m, key); !ok || got != want {
			t.Errorf("get(%s) = %v, %v; want %v", key, got, ok, want)
		}
	}
}
