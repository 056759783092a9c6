package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/providers/qemu"
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
	writes, reads           samples // one sequential pass of size bytes each
	creates, stats, unlinks samples // one pass over files files each
	gitStatus               samples // one git status each
}

// samples are the durations one measurement took, in the order taken.
type samples []time.Duration

// median returns the middle sample, or the mean of the two middle ones.
func (s samples) median() time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	switch n := len(c); {
	case n == 0:
		return 0
	case n%2 == 1:
		return c[n/2]
	default:
		return (c[n/2-1] + c[n/2]) / 2
	}
}

func (s samples) list(f func(time.Duration) string) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = f(d)
	}
	return strings.Join(parts, ", ")
}

// mbps is a throughput in MB (10^6 bytes) per second; 0 for no time.
func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}

// perSecond is a rate; 0 for no time.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// ratio is a ÷ b as "0.25×", or "n/a".
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
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
	throughput := func(what string, get func(*targetResult) samples) {
		v := func(t *targetResult) float64 { return mbps(r.size, get(t).median()) }
		fmt.Fprintf(w, "| %s | %.1f MB/s | %.1f MB/s | %.1f MB/s | %s | %s |\n", what, v(sbx), v(disk), v(virtfs), ratio(v(sbx), v(disk)), ratio(v(sbx), v(virtfs)))
	}
	rate := func(what string, get func(*targetResult) samples) {
		v := func(t *targetResult) float64 { return perSecond(r.files, get(t).median()) }
		fmt.Fprintf(w, "| %s | %.0f files/s | %.0f files/s | %.0f files/s | %s | %s |\n", what, v(sbx), v(disk), v(virtfs), ratio(v(sbx), v(disk)), ratio(v(sbx), v(virtfs)))
	}
	throughput(fmt.Sprintf("sequential write of %s (`dd bs=1M conv=fsync`)", sizeString(r.size)), func(t *targetResult) samples { return t.writes })
	throughput(fmt.Sprintf("sequential read of %s (`dd bs=1M`, page cache dropped)", sizeString(r.size)), func(t *targetResult) samples { return t.reads })
	rate(fmt.Sprintf("create %d empty files (shell `: > f$i`)", r.files), func(t *targetResult) samples { return t.creates })
	rate(fmt.Sprintf("stat %d files (`stat -c %%s dir/*`)", r.files), func(t *targetResult) samples { return t.stats })
	rate(fmt.Sprintf("unlink %d files (`rm dir/*`)", r.files), func(t *targetResult) samples { return t.unlinks })
	g := func(t *targetResult) float64 { return t.gitStatus.median().Seconds() }
	fmt.Fprintf(w, "| `git status` on a %d-file tree (time) | %.2f s | %.2f s | %.2f s | %s | %s |\n",
		r.gitFiles, g(sbx), g(disk), g(virtfs), ratio(g(sbx), g(disk)), ratio(g(sbx), g(virtfs)))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Samples, in the order taken:")
	fmt.Fprintln(w)
	for _, t := range r.targets {
		fmt.Fprintf(w, "- %s: write %s; read %s; create %s; stat %s; unlink %s; git status %s\n", t.name,
			t.writes.list(seconds), t.reads.list(seconds), t.creates.list(seconds), t.stats.list(seconds), t.unlinks.list(seconds), t.gitStatus.list(seconds))
	}
}

// sizeString writes n in whole MiB or GiB where it can.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return strconv.FormatInt(n, 10) + " bytes"
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
