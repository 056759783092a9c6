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
	targets  []*targetResult // the sbx mounts', the guest disk's, QEMU's -virtfs
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
// target, with each sbx mount's figure over the guest disk's and over
// QEMU's -virtfs (for rates a ratio above 1 is faster; for git status,
// a time, below 1 is), then the raw samples. The targets are the sbx
// mounts, then the guest disk, then QEMU's -virtfs, last. A run that did
// not measure every target prints nothing.
func (r *results) print(w io.Writer) {
	n := len(r.targets)
	if n < 3 || len(r.targets[0].writes) == 0 || len(r.targets[n-1].gitStatus) == 0 {
		return
	}
	sbx, disk, virtfs := r.targets[:n-2], r.targets[n-2], r.targets[n-1]
	fmt.Fprintf(w, "Workspace mount benchmark: one TCG guest, 1 vCPU, %d MiB; rounds: %d, medians (host: %d CPUs, %s %s, accelerator %s).\n\n",
		machineMemory>>20, len(sbx[0].writes), r.hostCPUs, r.qemu.Path, r.qemu.Version, r.host.Accel("amd64"))
	head := []string{"measurement"}
	for _, t := range r.targets {
		head = append(head, t.name)
	}
	for _, t := range sbx {
		head = append(head, t.name+" ÷ disk", t.name+" ÷ virtfs")
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, strings.Repeat("| --- ", len(head))+"|")
	row := func(what string, v func(*targetResult) float64, format string) {
		cells := []string{what}
		for _, t := range r.targets {
			cells = append(cells, fmt.Sprintf(format, v(t)))
		}
		for _, t := range sbx {
			cells = append(cells, vmbench.Ratio(v(t), v(disk)), vmbench.Ratio(v(t), v(virtfs)))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	throughput := func(what string, get func(*targetResult) vmbench.Samples) {
		row(what, func(t *targetResult) float64 { return vmbench.MBps(r.size, get(t).Median()) }, "%.1f MB/s")
	}
	rate := func(what string, get func(*targetResult) vmbench.Samples) {
		row(what, func(t *targetResult) float64 { return vmbench.PerSecond(r.files, get(t).Median()) }, "%.0f files/s")
	}
	throughput(fmt.Sprintf("sequential write of %s (`dd bs=1M conv=fsync`)", vmbench.Size(r.size)), func(t *targetResult) vmbench.Samples { return t.writes })
	throughput(fmt.Sprintf("sequential read of %s (`dd bs=1M`, page cache dropped)", vmbench.Size(r.size)), func(t *targetResult) vmbench.Samples { return t.reads })
	rate(fmt.Sprintf("create %d empty files (shell `: > f$i`)", r.files), func(t *targetResult) vmbench.Samples { return t.creates })
	rate(fmt.Sprintf("stat %d files (`stat -c %%s dir/*`)", r.files), func(t *targetResult) vmbench.Samples { return t.stats })
	rate(fmt.Sprintf("unlink %d files (`rm dir/*`)", r.files), func(t *targetResult) vmbench.Samples { return t.unlinks })
	row(fmt.Sprintf("`git status` on a %d-file tree (time)", r.gitFiles), func(t *targetResult) float64 { return t.gitStatus.Median().Seconds() }, "%.2f s")
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
