package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// timed is one command in a guest: its wall time and the CPU time its
// QEMU spent meanwhile.
type timed struct {
	wall time.Duration
	cpu  float64 // seconds
}

// sample is one machine, old or new, through sample's steps.
type sample struct {
	boot    time.Duration // machine.Start, to the agent's answer
	uptime  time.Duration // the guest's uptime at its ready line
	bootCPU float64       // QEMU's CPU seconds by then
	idle    qemuMemory    // after booting and idling
	worked  qemuMemory    // after the workload
	gofmt   []timed
	sha     []timed
	// The guest RAM mapping's resident bytes before the fill, with
	// fillMiB written and freeWait after freeing it.
	ramBefore, ramFilled, ramFreed int64
}

// countResult is the count of idle sandboxes held at once.
type countResult struct {
	held       int
	stopped    string // what ended the booting
	reserve    int64
	availStart int64
	availEnd   int64
	qemu       []qemuMemory
	sup        []usage
	idleCores  float64 // CPU cores the held QEMUs used while idle
	load       string
}

// results is everything print reports.
type results struct {
	config   config
	host     qemu.Host
	qemu     qemu.Binary
	hostCPUs int
	memTotal int64
	variants []variant
	samples  [][]sample // by variant: old, new, then the further buffers
	count    *countResult
}

func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "# densitybench\n\n")
	fmt.Fprintf(w, "QEMU %s at %s, accelerator %s; %d host CPUs, %s of memory; guests of %d MiB, 1 vCPU; rounds: %d; idle %v before each reading.\n",
		r.qemu.Version, r.qemu.Path, r.host.Accel("amd64"), r.hostCPUs, gib(r.memTotal), r.config.memory>>20, r.config.rounds, r.config.idle)
	if r.host.Note != "" {
		fmt.Fprintf(w, "%s.\n", r.host.Note)
	}
	fmt.Fprintf(w, "Old: the machine before decision 0009 (machine.Bench.Legacy). New: what sandboxes run (TCG buffer %d MiB, balloon with free page reporting).\n\n", qemu.TCGBufferMiB)
	if len(r.samples) >= 2 && len(r.samples[0]) > 0 && len(r.samples[1]) > 0 {
		r.printMemory(w)
		r.printTimes(w)
	}
	if r.count != nil {
		r.printCount(w)
	}
	r.printRaw(w)
}

// med returns the median of the values f picks from samples.
func med[T any](samples []T, f func(T) float64) float64 {
	var v []float64
	for _, s := range samples {
		v = append(v, f(s))
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// header writes a table's header: what, a column per variant with
// samples, and new ÷ old.
func (r *results) header(w io.Writer, what string) {
	fmt.Fprintf(w, "| %s |", what)
	for i, v := range r.variants {
		if len(r.samples[i]) > 0 {
			fmt.Fprintf(w, " %s |", v.name)
		}
	}
	fmt.Fprintf(w, " new ÷ old |\n| --- |")
	for i := range r.variants {
		if len(r.samples[i]) > 0 {
			fmt.Fprintf(w, " ---: |")
		}
	}
	fmt.Fprintf(w, " ---: |\n")
}

// row writes one row: the median of f over each variant's samples.
func (r *results) row(w io.Writer, name string, f func(sample) float64, unit func(float64) string) {
	fmt.Fprintf(w, "| %s |", name)
	for i := range r.variants {
		if len(r.samples[i]) > 0 {
			fmt.Fprintf(w, " %s |", unit(med(r.samples[i], f)))
		}
	}
	fmt.Fprintf(w, " %s |\n", ratio(med(r.samples[1], f), med(r.samples[0], f)))
}

func (r *results) printMemory(w io.Writer) {
	r.header(w, "host memory of one idle sandbox's QEMU (medians)")
	row := func(name string, f func(sample) float64) { r.row(w, name, f, mibf) }
	row("**overhead**: anonymous memory beyond the guest RAM, idle after boot", func(s sample) float64 { return float64(s.idle.Overhead()) })
	row("… of which TCG's translation buffer", func(s sample) float64 { return float64(s.idle.Code.Anon) })
	row("overhead after the workload (gofmt, sha256sum)", func(s sample) float64 { return float64(s.worked.Overhead()) })
	row("RSS beyond the guest RAM, idle (clean file pages included)", func(s sample) float64 { return float64(s.idle.Beyond().Rss) })
	row("… of which clean file pages, shared by every QEMU", func(s sample) float64 { return float64(s.idle.SharedFile()) })
	row("PSS beyond the guest RAM, idle", func(s sample) float64 { return float64(s.idle.Beyond().Pss) })
	row("guest RAM resident, idle after boot", func(s sample) float64 { return float64(s.idle.RAM.Rss) })
	row("guest RAM resident after the workload", func(s sample) float64 { return float64(s.ramBefore) })
	row(fmt.Sprintf("… with %d MiB written to a tmpfs", fillMiB), func(s sample) float64 { return float64(s.ramFilled) })
	row(fmt.Sprintf("… %v after freeing them", freeWait), func(s sample) float64 { return float64(s.ramFreed) })
	row("QEMU's whole RSS after freeing them", func(s sample) float64 { return float64(s.ramFreed + s.worked.Beyond().Rss) })
	fmt.Fprintln(w)
}

func (r *results) printTimes(w io.Writer) {
	r.header(w, "time (medians)")
	row := func(name string, f func(sample) float64, unit func(float64) string) { r.row(w, name, f, unit) }
	secs := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	row("boot: machine.Start to the agent's answer", func(s sample) float64 { return s.boot.Seconds() }, secs)
	row("… the guest's uptime at its ready line", func(s sample) float64 { return s.uptime.Seconds() }, secs)
	row("… QEMU's CPU time by then", func(s sample) float64 { return s.bootCPU }, secs)
	row(fmt.Sprintf("gofmt -l over %d files of go/types, wall (median of %d)", gofmtFiles, gofmtRuns), func(s sample) float64 { return med(s.gofmt, func(t timed) float64 { return t.wall.Seconds() }) }, secs)
	row("… QEMU's CPU time", func(s sample) float64 { return med(s.gofmt, func(t timed) float64 { return t.cpu }) }, secs)
	row(fmt.Sprintf("sha256sum of %d MiB, wall (median of %d)", shaBytes>>20, shaRuns), func(s sample) float64 { return med(s.sha, func(t timed) float64 { return t.wall.Seconds() }) }, secs)
	row("… QEMU's CPU time", func(s sample) float64 { return med(s.sha, func(t timed) float64 { return t.cpu }) }, secs)
	fmt.Fprintln(w)
}

func (r *results) printCount(w io.Writer) {
	c := r.count
	fmt.Fprintf(w, "| idle sandboxes of %d MiB held at once (new machine, supervised) | |\n| --- | ---: |\n", r.config.memory>>20)
	fmt.Fprintf(w, "| held | %d |\n", c.held)
	fmt.Fprintf(w, "| booting stopped at | %s |\n", orDash(c.stopped))
	if len(c.qemu) == 0 {
		fmt.Fprintf(w, "\n(no idle measurement)\n\n")
		return
	}
	fmt.Fprintf(w, "| host MemAvailable before / after | %s / %s |\n", gib(c.availStart), gib(c.availEnd))
	if c.held > 0 {
		per := float64(c.availStart-c.availEnd) / float64(c.held)
		fmt.Fprintf(w, "| MemAvailable taken per idle sandbox | %s |\n", mibf(per))
		f := func(pick func(qemuMemory) int64) float64 {
			var v []float64
			for _, q := range c.qemu {
				v = append(v, float64(pick(q)))
			}
			return median(v)
		}
		fmt.Fprintf(w, "| QEMU overhead per sandbox (median) | %s |\n", mibf(f(func(q qemuMemory) int64 { return q.Overhead() })))
		fmt.Fprintf(w, "| guest RAM resident per sandbox (median) | %s |\n", mibf(f(func(q qemuMemory) int64 { return q.RAM.Rss })))
		fmt.Fprintf(w, "| QEMU PSS beyond guest RAM (median) | %s |\n", mibf(f(func(q qemuMemory) int64 { return q.Beyond().Pss })))
		var sa, sp []float64
		for _, s := range c.sup {
			sa, sp = append(sa, float64(s.Anon)), append(sp, float64(s.Pss))
		}
		fmt.Fprintf(w, "| supervisor per sandbox, anonymous / PSS (median) | %s / %s |\n", mibf(median(sa)), mibf(median(sp)))
		// What one sandbox holds that nothing else shares: QEMU's
		// anonymous memory, guest RAM included, and the supervisor's.
		var held []float64
		for i, q := range c.qemu {
			held = append(held, float64(q.Total.Anon+c.sup[i].Anon))
		}
		own := median(held)
		fmt.Fprintf(w, "| anonymous memory per sandbox, QEMU (guest RAM included) and supervisor (median) | %s |\n", mibf(own))
		if rate := max(per, own); rate > 0 && c.availEnd > c.reserve {
			more := int(float64(c.availEnd-c.reserve) / rate)
			fmt.Fprintf(w, "| more that would fit above the %s reserve at the larger of those two rates (projection, not held) | %d |\n", gib(c.reserve), more)
		}
		fmt.Fprintf(w, "| CPU the idle QEMUs use, together | %.2f cores (%.1f%% of a core each) |\n", c.idleCores, 100*c.idleCores/float64(c.held))
	}
	fmt.Fprintf(w, "| host load average at the end (1 min) | %s |\n\n", c.load)
}

func (r *results) printRaw(w io.Writer) {
	fmt.Fprintf(w, "Raw samples (MiB; overhead, TCG buffer, RSS beyond RAM, guest RAM idle / before fill / filled / freed; boot s; gofmt wall s / CPU s):\n\n```\n")
	for vi, v := range r.variants {
		for i, s := range r.samples[vi] {
			var gw, gc []string
			for _, t := range s.gofmt {
				gw = append(gw, fmt.Sprintf("%.2f", t.wall.Seconds()))
				gc = append(gc, fmt.Sprintf("%.2f", t.cpu))
			}
			fmt.Fprintf(w, "%s %d: overhead %.1f (after work %.1f), tcg %.1f, rss beyond %.1f, ram %.1f / %.1f / %.1f / %.1f; boot %.2f (uptime %.2f, cpu %.2f); gofmt %s / %s\n",
				v.name, i+1, mb(s.idle.Overhead()), mb(s.worked.Overhead()), mb(s.idle.Code.Anon), mb(s.idle.Beyond().Rss),
				mb(s.idle.RAM.Rss), mb(s.ramBefore), mb(s.ramFilled), mb(s.ramFreed),
				s.boot.Seconds(), s.uptime.Seconds(), s.bootCPU, strings.Join(gw, " "), strings.Join(gc, " "))
		}
	}
	if c := r.count; c != nil {
		for i, q := range c.qemu {
			fmt.Fprintf(w, "count %d: overhead %.1f, ram %.1f, supervisor anon %.1f\n", i+1, mb(q.Overhead()), mb(q.RAM.Rss), mb(c.sup[i].Anon))
		}
	}
	fmt.Fprintf(w, "```\n")
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

func mib(n int64) string { return mibf(float64(n)) }

func mibf(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func ratio(n, o float64) string {
	if o == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", n/o)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
