package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeSummary(t *testing.T, name, js string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	js = strings.NewReplacer("\n", "", "\t", "").Replace(js) // one SUMMARY line
	if err := os.WriteFile(p, []byte("# some output\nSUMMARY "+js+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompareThreeWay(t *testing.T) {
	ours := writeSummary(t, "ours.txt", `{"seq_same_first_ms":{"median":4,"p99":9},"seq_new_first_ms":{"median":5,"p99":8},
		"fanout_event_50_all_idle_ms":{"median":6,"max":7},"fanout_event_50_all_first_ms_median":5.5,"rss_start_kb":15000}`)
	ref := writeSummary(t, "opencode.txt", `{"seq_same_first_ms":{"median":100,"p99":200},"rss_start_kb":300000}`)
	yard := writeSummary(t, "yardstick.txt", `{"seq_same_first_ms":{"median":1,"p99":3},"seq_new_first_ms":{"median":2.5,"p99":4},
		"fanout_event_50_all_idle_ms":{"median":2,"max":2.5},"fanout_event_50_all_first_ms_median":1.9,"rss_start_kb":8000}`)

	var b strings.Builder
	if err := compare(&b, ours, ref, yard); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| metric | unit | ours | opencode | ours:opencode |",
		"| (a) same session: first text median | ms | 4.00 | 100.00 | 0.040 |",
		"| metric | unit | ours | yardstick | ours:yardstick |",
		"| (a) same session: first text median | ms | 4.00 | 1.00 | 4.00 |",
		"| (a) new session each: first text p99 | ms | 8.00 | 4.00 | 2.00 |",
		"| (c) /event x50: all got first text, median | ms | 5.50 | 1.90 | 2.89 |",
		"| (f) RSS at start | kB | 15000 | 8000 | 1.88 |",
		"| first text median (same session) | 4.00 vs 1.00 ms = 4.00x | NOT MET |",
		"| first text p99 (new session each) | 8.00 vs 4.00 ms = 2.00x | met |",
		"| 50-subscriber fan-out, all saw idle (/event) | 6.00 vs 2.00 ms = 3.00x | NOT MET |",
		"| 50-subscriber fan-out, all saw idle (/global/event) | - | n/a |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// rows neither side measured are left out of the yardstick table
	yt := out[strings.Index(out, "ours:yardstick"):]
	if strings.Contains(yt, "/global/event x1000") {
		t.Errorf("yardstick table lists a row neither side has:\n%s", yt)
	}
	if i, j := strings.Index(out, "ours:opencode"), strings.Index(out, "ours:yardstick"); i < 0 || j < i {
		t.Errorf("want the opencode table first, then the yardstick one:\n%s", out)
	}
}

func TestCompareYardstickOnly(t *testing.T) {
	ours := writeSummary(t, "ours.txt", `{"seq_same_first_ms":{"median":3,"p99":6}}`)
	yard := writeSummary(t, "yardstick.txt", `{"seq_same_first_ms":{"median":2,"p99":2}}`)
	var b strings.Builder
	if err := compare(&b, ours, "-", yard); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "opencode") {
		t.Errorf("'-' should leave the opencode table out:\n%s", out)
	}
	for _, want := range []string{
		"| (a) same session: first text median | ms | 3.00 | 2.00 | 1.50 |",
		"| first text median (same session) | 3.00 vs 2.00 ms = 1.50x | met |",
		"| first text p99 (same session) | 6.00 vs 2.00 ms = 3.00x | NOT MET |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestCompareTwoWayUnchanged(t *testing.T) {
	ours := writeSummary(t, "ours.txt", `{"seq_same_first_ms":{"median":4,"p99":9}}`)
	ref := writeSummary(t, "opencode.txt", `{"seq_same_first_ms":{"median":100,"p99":200}}`)
	var b strings.Builder
	if err := compare(&b, ours, ref, ""); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "yardstick") || !strings.Contains(out, "| prompt_async->first text median <= 1/25 of opencode (same session) | 4.00 vs 100.00 = 1/25.0 | met |") {
		t.Errorf("two-way output changed:\n%s", out)
	}
}
