package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
)

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("1, 4,8"); err != nil || len(got) != 3 || got[1] != 4 {
		t.Errorf("parseCounts: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "-2"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) succeeded", bad)
		}
	}
}

// TestPrint checks the table's figures: N × the lone runs' median, the
// ratio, and the per-run medians from the index.
func TestPrint(t *testing.T) {
	run := func(boot, cmd int64) sbx.EvalRun { return sbx.EvalRun{BootMS: boot, CommandMS: cmd} }
	r := &results{parallel: 4, files: 3, hostCPUs: 2, copy: "3 files", counts: []int{1, 4},
		single: []sample{{n: 1, wall: 10 * time.Second}, {n: 1, wall: 12 * time.Second}, {n: 1, wall: 30 * time.Second}},
		evals: map[int][]sample{
			1: {{n: 1, wall: 11 * time.Second, runs: []sbx.EvalRun{run(8000, 1000)}}},
			4: {{n: 4, wall: 24 * time.Second, runs: []sbx.EvalRun{run(8000, 1000), run(9000, 2000), run(10000, 3000), run(11000, 4000)}}},
		},
	}
	var b strings.Builder
	r.print(&b)
	out := b.String()
	for _, want := range []string{
		"lone runs: 3, median 12.0s",
		"| 1 | 11.0s | 12.0s | 0.92 | 5.5 | 8.0s | 1.0s |",
		"| 4 | 24.0s | 48.0s | 0.50 | 10.0 | 9.5s | 2.5s |",
		"N=4: 24.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
