package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/sandbox"
)

func TestParseBatches(t *testing.T) {
	got, err := parseBatches("1, 4,8,4")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 8 {
		t.Errorf("parseBatches = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "17", "x", "1,,2"} {
		if _, err := parseBatches(bad); err == nil {
			t.Errorf("parseBatches(%q) took it", bad)
		}
	}
}

func TestParseRollup(t *testing.T) {
	text := "55d0c0000000-7ffd00000000 ---p 00000000 00:00 0                          [rollup]\n" +
		"Rss:              150000 kB\nPss:               60000 kB\nPss_Anon:          40000 kB\nShared_Clean:      1000 kB\n"
	u, err := parseRollup(text, "rollup")
	if err != nil || u.Rss != 150000<<10 || u.Pss != 60000<<10 {
		t.Errorf("parseRollup = %+v, %v", u, err)
	}
	if _, err := parseRollup("Rss: 1 kB\n", "rollup"); err == nil {
		t.Error("a rollup with no Pss line was taken")
	}
	if _, err := parseRollup("Rss: 1 MB\nPss: 1 kB\n", "rollup"); err == nil {
		t.Error("a size not in kB was taken")
	}
}

// TestPrint checks the report's rows and ratios from made-up samples, and
// that a run that failed early prints what it has.
func TestPrint(t *testing.T) {
	s := func(answer float64, how string) sample {
		d := time.Duration(answer * float64(time.Second))
		return sample{answered: d, returned: d - 10*time.Millisecond, started: sandbox.Started{
			How: how, Took: d - 30*time.Millisecond, Load: 5 * time.Millisecond, Configure: 8 * time.Millisecond,
			Machine: machine.Timings{Prepare: time.Millisecond, Launch: 2 * time.Millisecond, Restore: 3 * time.Millisecond, Agent: 4 * time.Millisecond},
		}}
	}
	r := &results{n: 2, qemu: "QEMU 7.2.0", cpus: 1, memory: 512 << 20, hostCPUs: 2,
		saved:      s(30, sandbox.Saved),
		files:      []snapshotFile{{name: "memory", size: 512 << 20, allocated: 100 << 20}},
		cold:       []sample{s(10, sandbox.Cold), s(12, sandbox.Cold)},
		warmFresh:  []sample{s(1, sandbox.Warm), s(1.4, sandbox.Warm)},
		warmLoaded: []sample{s(0.5, sandbox.Warm), s(0.7, sandbox.Warm)},
		batches: []batchResult{
			{k: 4, all: 40 * time.Second, pss: 100 << 20, rss: 200 << 20},
			{k: 4, warm: true, all: 4 * time.Second, pss: 25 << 20, rss: 150 << 20},
		},
	}
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{
		"| cold: booted | 2 | 10.00 s | 11.00 s | 1.00× |",
		"| warm, cache opened afresh (as a new process: snapshot verified, memory copied) | 2 | 1.00 s | 1.20 s | 0.11× |",
		"| warm, cache already loaded in this process | 2 | 0.50 s | 0.60 s | 0.05× |",
		"| save: the first start less a warm one (fresh cache, median) | 28.80 s |",
		"| `memory`: allocated on disk (apparent size) | 100.0 MiB (512.0 MiB) |",
		"| 4 | 40.00 s | 4.00 s | 0.10× |",
		"| 4 | 100.0 MiB | 25.0 MiB | 0.25× | 200.0 MiB | 150.0 MiB | 0.75× |",
		"| first exec of `true` | 10.0 ms | 10.0 ms | 10.0 ms | yes |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no line %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	(&results{qemu: "QEMU 7.2.0"}).print(&out)
	if !strings.Contains(out.String(), "QEMU 7.2.0") || strings.Contains(out.String(), "|") {
		t.Errorf("a run that measured nothing printed %q", out.String())
	}
}
