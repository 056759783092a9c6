package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// results are what a run measured; a run cut short prints what it has.
type results struct {
	size     int64
	files    int
	gitFiles int
	host     qemu.Host
	qemu     qemu.Binary
	hostCPUs int
	targets  []*targetResult // the sbx mount's, the guest disk's, QEMU's -virtfs
}

// targetResult is what one target measured, its samples in the order
// taken.
type targetResult struct {
	name                    string
	writes, reads           vmbench.Samples // one sequential pass of size bytes each
	creates, stats, unlinks vmbench.Samples // one pass over files files each
	gitStatus               vmbench.Samples // one git status each
}

// print writes the Markdown tables: each measurement's median on each
// target, with the sbx mount's figure over the guest disk's and over
// QEMU's -virtfs (for rates a ratio above 1 is faster; for git status,
// a time, below 1 is), then the raw samples. A run that did not measure
// all three targets prints nothing.
func (r *results) print(w io.Writer) {
	if len(r.targets) != 3 || len(r.targets[0].writes) == 0 || len(r.targets[2].gitStatus) == 0 {
		return
	}
	sbx, disk, virtfs := r.targets[0], r.targets[1], r.targets[2]
	fmt.Fprintf(w, "Workspace mount benchmark: one TCG guest, 1 vCPU, %d MiB; rounds: %d, medians (host: %d CPUs, %s %s, accelerator %s).\n\n",
		machineMemory>>20, len(sbx.writes), r.hostCPUs, r.qemu.Path, r.qemu.Version, r.host.Accel("amd64"))
	fmt.Fprintln(w, "| measurement | sbx mount | guest disk | QEMU -virtfs | sbx ÷ disk | sbx ÷ virtfs |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	throughput := func(what string, get func(*targetResult) vmbench.Samples) {
		v := func(t *targetResult) float64 { return vmbench.MBps(r.size, get(t).Median()) }
		fmt.Fprintf(w, "| %s | %.1f MB/s | %.1f MB/s | %.1f MB/s | %s | %s |\n", what, v(sbx), v(disk), v(virtfs), vmbench.Ratio(v(sbx), v(disk)), vmbench.Ratio(v(sbx), v(virtfs)))
	}
	rate := func(what string, get func(*targetResult) vmbench.Samples) {
		v := func(t *targetResult) float64 { return vmbench.PerSecond(r.files, get(t).Median()) }
		fmt.Fprintf(w, "| %s | %.0f files/s | %.0f files/s | %.0f files/s | %s | %s |\n", what, v(sbx), v(disk), v(virtfs), vmbench.Ratio(v(sbx), v(disk)), vmbench.Ratio(v(sbx), v(virtfs)))
	}
	throughput(fmt.Sprintf("sequential write of %s (`dd bs=1M conv=fsync`)", vmbench.Size(r.size)), func(t *targetResult) vmbench.Samples { return t.writes })
	throughput(fmt.Sprintf("sequential read of %s (`dd bs=1M`, page cache dropped)", vmbench.Size(r.size)), func(t *targetResult) vmbench.Samples { return t.reads })
	rate(fmt.Sprintf("create %d empty files (shell `: > f$i`)", r.files), func(t *targetResult) vmbench.Samples { return t.creates })
	rate(fmt.Sprintf("stat %d files (`stat -c %%s dir/*`)", r.files), func(t *targetResult) vmbench.Samples { return t.stats })
	rate(fmt.Sprintf("unlink %d files (`rm dir/*`)", r.files), func(t *targetResult) vmbench.Samples { return t.unlinks })
	g := func(t *targetResult) float64 { return t.gitStatus.Median().Seconds() }
	fmt.Fprintf(w, "| `git status` on a %d-file tree (time) | %.2f s | %.2f s | %.2f s | %s | %s |\n",
		r.gitFiles, g(sbx), g(disk), g(virtfs), vmbench.Ratio(g(sbx), g(disk)), vmbench.Ratio(g(sbx), g(virtfs)))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Samples, in the order taken:")
	fmt.Fprintln(w)
	for _, t := range r.targets {
		fmt.Fprintf(w, "- %s: write %s; read %s; create %s; stat %s; unlink %s; git status %s\n", t.name,
			t.writes.List(vmbench.Seconds), t.reads.List(vmbench.Seconds), t.creates.List(vmbench.Seconds), t.stats.List(vmbench.Seconds), t.unlinks.List(vmbench.Seconds), t.gitStatus.List(vmbench.Seconds))
	}
}

// parseSize reads a positive whole number of MiB written with a MiB or
// GiB suffix, at most 64 GiB: dd writes whole MiB.
func parseSize(s string) (int64, error) {
	var unit int64
	var num string
	switch {
	case strings.HasSuffix(s, "GiB"):
		unit, num = 1<<30, strings.TrimSuffix(s, "GiB")
	case strings.HasSuffix(s, "MiB"):
		unit, num = 1<<20, strings.TrimSuffix(s, "MiB")
	default:
		return 0, fmt.Errorf("size %q: write a whole number with a MiB or GiB suffix", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n*unit > 64<<30 {
		return 0, fmt.Errorf("size %q: write a whole number from 1 MiB to 64 GiB", s)
	}
	return n * unit, nil
}
