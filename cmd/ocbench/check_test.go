package main

import (
	"strings"
	"testing"
)

// TestCheck: each guard holds or not by its own figure; a figure missing
// from a run fails its guard.
func TestCheck(t *testing.T) {
	yard := writeSummary(t, "yardstick.txt", `{"seq_new_first_ms":{"median":2},"seq_same_first_ms":{"median":2},
		"seq_same_idle_ms":{"median":3},"fanout_event_50_all_idle_ms":{"median":5},"seq_cpu_ms_per_prompt":1}`)
	tests := []struct {
		name, ours string
		failed     int
		over       []string
	}{
		{"all within", `{"seq_new_first_ms":{"median":4},"seq_same_first_ms":{"median":3},"seq_same_idle_ms":{"median":6},
			"fanout_event_50_all_idle_ms":{"median":9},"seq_cpu_ms_per_prompt":2,"rss_start_kb":15000,"big_growth_x":7.9}`, 0, nil},
		{"first text over 2x, RSS over", `{"seq_new_first_ms":{"median":4.2},"seq_same_first_ms":{"median":3},"seq_same_idle_ms":{"median":6},
			"fanout_event_50_all_idle_ms":{"median":9},"seq_cpu_ms_per_prompt":2,"rss_start_kb":16000,"big_growth_x":7.9}`, 2,
			[]string{"first text, median (new session each)", "RSS at start"}},
		{"big prompt not measured", `{"seq_new_first_ms":{"median":4},"seq_same_first_ms":{"median":3},"seq_same_idle_ms":{"median":6},
			"fanout_event_50_all_idle_ms":{"median":9},"seq_cpu_ms_per_prompt":2,"rss_start_kb":15000}`, 1, []string{"8 MiB prompt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			failed, err := check(&b, writeSummary(t, "ours.txt", tt.ours), yard)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tt.failed {
				t.Errorf("%d guards failed, want %d:\n%s", failed, tt.failed, b.String())
			}
			for _, line := range strings.Split(b.String(), "\n") {
				bad := strings.HasSuffix(line, "| OVER |") || strings.HasSuffix(line, "| missing |")
				named := false
				for _, o := range tt.over {
					named = named || strings.Contains(line, o)
				}
				if bad != named {
					t.Errorf("line %q: failing %v, want %v", line, bad, named)
				}
			}
		})
	}
}
