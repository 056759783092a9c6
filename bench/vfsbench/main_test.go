package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

// TestTinyRun runs the benchmark small: the image with git builds, the
// guest boots with both exports, every measurement runs and passes its
// check on all three targets, and the report has a figure and two ratios
// for each. Then it checks that the three targets are what they claim:
// the sbx mount hides .env where QEMU's export of the same tree shows
// it, and the disk's copy is not on the host.
func TestTinyRun(t *testing.T) {
	qemutest.Require(t)
	if srcs, err := debrepo.HostSources("/"); err != nil {
		t.Fatal(err)
	} else if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	b := &bench{size: 4 << 20, files: 50, gitFiles: 200, rounds: 1, log: vmbench.Log{W: io.Discard, Name: "vfsbench"}}
	if testing.Verbose() {
		b.log.W = os.Stderr
	}
	work := t.TempDir()
	img, _, err := b.setup(context.Background(), work)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res := &results{}
	err = b.measure(ctx, img, res)
	t.Cleanup(func() {
		if err := b.cleanup(); err != nil {
			t.Error(err)
		}
		machinetest.Cleanup()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.targets {
		for _, s := range []vmbench.Samples{r.writes, r.reads, r.creates, r.stats, r.unlinks, r.gitStatus} {
			if len(s) != 1 {
				t.Errorf("%s: %d samples of one measurement, want 1", r.name, len(s))
			}
		}
	}
	var out strings.Builder
	res.print(&out)
	report := out.String()
	for _, want := range []string{"| sequential write of 4 MiB", "| create 50 empty files", "| `git status` on a 200-file tree (time) |", "accelerator "} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "n/a") {
		t.Errorf("the report has a missing figure:\n%s", report)
	}
	probe, err := b.sh(ctx, time.Minute, `for d in `+sbxMount+` `+fsMount+` `+virtfsMount+`; do test -e $d/.env && echo "$d shows .env"; done; test -e `+diskDir+`/repo/.git && echo disk has repo; true`)
	if err != nil {
		t.Fatal(err)
	}
	if probe != virtfsMount+" shows .env\ndisk has repo\n" {
		t.Errorf("the targets are not what they claim: %q", probe)
	}
	if _, err := os.Stat(b.tree + "/w-disk"); err == nil {
		t.Error("the guest disk's directory is on the host")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "4MiB": 4 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0MiB", "-1MiB", "1GB", "MiB", "1.5GiB", "65GiB", "3KiB", "1000"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

// TestReport checks the figures and ratios against samples whose
// answers are easy to work out.
func TestReport(t *testing.T) {
	s := vmbench.Of
	r := &results{
		size: 100e6, files: 1000, gitFiles: 10000, hostCPUs: 2,
		host: qemu.Host{Arch: "amd64", Accels: []qemu.Accel{qemu.AccelTCG}},
		qemu: qemu.Binary{Path: "/usr/bin/qemu-system-x86_64"},
		targets: []*targetResult{
			{name: "sbx mount", writes: s(4, 2, 5), reads: s(1), creates: s(2), stats: s(1), unlinks: s(0.5), gitStatus: s(3)},
			{name: "guest disk", writes: s(1), reads: s(0.5), creates: s(1), stats: s(0.25), unlinks: s(0.25), gitStatus: s(1)},
			{name: "QEMU -virtfs", writes: s(2), reads: s(2), creates: s(4), stats: s(1), unlinks: s(1), gitStatus: s(6)},
		},
	}
	var out strings.Builder
	r.print(&out)
	got := out.String()
	for _, want := range []string{
		// 100 MB in a median of 4 s, 1 s and 2 s.
		"| 25.0 MB/s | 100.0 MB/s | 50.0 MB/s | 0.25× | 0.50× |",
		"| 100.0 MB/s | 200.0 MB/s | 50.0 MB/s | 0.50× | 2.00× |",
		"| create 1000 empty files (shell `: > f$i`) | 500 files/s | 1000 files/s | 250 files/s | 0.50× | 2.00× |",
		"| `git status` on a 10000-file tree (time) | 3.00 s | 1.00 s | 6.00 s | 3.00× | 0.50× |",
		"- sbx mount: write 4.00 s, 2.00 s, 5.00 s;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	// A run cut short before every target ran prints nothing.
	var none strings.Builder
	(&results{targets: r.targets[:2]}).print(&none)
	if none.Len() != 0 {
		t.Errorf("a partial run printed %q", none.String())
	}
}
