package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// results are what a run measured; a run cut short prints what it has.
type results struct {
	n        int
	host     qemu.Host
	qemu     qemu.Binary
	hostCPUs int
	cpus     int
	memory   int64

	warmBaseline baselineSample
	warmRun      time.Duration
	firstLine    string // the text of the warm-up's first console line

	firstLines  vmbench.Samples // bare QEMU: start → first console line
	readyLines  vmbench.Samples // bare QEMU: start → the agent's ready line
	guestUptime vmbench.Samples // the guest kernel's uptime at the ready line
	baseExits   vmbench.Samples // bare QEMU: start → exit
	sbxRuns     vmbench.Samples // sbx run: start → exit

	execSupervisor vmbench.Samples
	execCLI        vmbench.Samples
	// The errors of the execs that failed, which are not timed.
	execSupervisorFailed, execCLIFailed []string

	mem1, mem4 []memSample
}

func (r *results) print(w io.Writer) {
	if r.qemu.Path == "" {
		return
	}
	accel := r.host.Accel("amd64")
	fmt.Fprintf(w, "## sandboxbench\n\n")
	fmt.Fprintf(w, "%s; %d host CPUs; the sandbox has %d vCPU and %d MiB.\n\n", vmbench.QEMU(r.host, r.qemu), r.hostCPUs, max(r.cpus, 1), r.memory>>20)

	if len(r.sbxRuns) > 0 {
		fmt.Fprintf(w, "### Boot to first exec (n = %d each, alternated, after one warm-up of each)\n\n", len(r.sbxRuns))
		fmt.Fprintf(w, "| measurement | min | median | sbx run ÷ this, medians | sbx run ÷ this, mins |\n|---|---:|---:|---:|---:|\n")
		row := func(name string, s vmbench.Samples) {
			if len(s) == 0 {
				fmt.Fprintf(w, "| %s | — | — | — | — |\n", name)
				return
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, vmbench.Seconds(s.Min()), vmbench.Seconds(s.Median()),
				vmbench.Ratio(r.sbxRuns.Median().Seconds(), s.Median().Seconds()), vmbench.Ratio(r.sbxRuns.Min().Seconds(), s.Min().Seconds()))
		}
		row("bare QEMU: start → first console line", r.firstLines)
		row("bare QEMU: start → agent's ready line", r.readyLines)
		row("bare QEMU: start → exit (the agent powers off after its ready line)", r.baseExits)
		row("`sbx run DIR box -- true`: start → exit", r.sbxRuns)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Bare QEMU boots the image's kernel, initramfs and disk (snapshot=on) with none of sbx's kernel parameters, so the agent runs in its default mode: ready line, then power-off; it has loglevel=6 where sbx has quiet, so that the kernel's banner is a first line to time. ")
		fmt.Fprintf(w, "sbx run also checks the lock and the image cache, makes a qcow2 overlay, waits for the agent's hello over virtio-serial, runs `true` as the sandbox's user and powers the guest off.\n")
		fmt.Fprintf(w, "On a shared machine noise only adds time, so the ratio of the minimums is the steadier of the two.\n")
		if r.firstLine != "" {
			fmt.Fprintf(w, "The first console line was %q.\n", r.firstLine)
		}
		fmt.Fprintln(w)
	}

	if len(r.execSupervisor) > 0 {
		fmt.Fprintf(w, "### Exec of `true` in a running sandbox\n\n")
		fmt.Fprintf(w, "| path | n | failed | median | p90 |\n|---|---:|---:|---:|---:|\n")
		row := func(name string, s vmbench.Samples, failed []string) {
			if len(s) == 0 {
				return
			}
			fmt.Fprintf(w, "| %s | %d | %d | %s | %s |\n", name, len(s), len(failed), vmbench.Millis(s.Median()), vmbench.Millis(s.Percentile(90)))
		}
		row("supervisor.Dial client, Exec (one connection)", r.execSupervisor, r.execSupervisorFailed)
		row("`sbx exec DIR box -- true` (a process each, sbx's start included)", r.execCLI, r.execCLIFailed)
		fmt.Fprintln(w)
		if len(r.execSupervisorFailed)+len(r.execCLIFailed) > 0 {
			fmt.Fprintf(w, "Failed execs are not timed; their errors are under the raw samples.\n\n")
		}
	}

	if len(r.mem1) > 0 {
		fmt.Fprintf(w, "### Host memory per idle supervised sandbox (guest RAM %d MiB, after %v idle)\n\n", r.memory>>20, idle)
		fmt.Fprintf(w, "| running | sandbox | supervisor RSS | supervisor PSS | QEMU RSS − guest RAM | QEMU PSS − guest RAM | guest RAM resident | overhead beyond guest RAM, RSS | overhead beyond guest RAM, PSS |\n")
		fmt.Fprintf(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
		table := func(ms []memSample) {
			var sum memSample
			for _, m := range ms {
				memRow(w, len(ms), m.name, m)
				sum.supervisor = add(sum.supervisor, m.supervisor)
				sum.qemu = add(sum.qemu, m.qemu)
				sum.guestRAM = add(sum.guestRAM, m.guestRAM)
				sum.code = add(sum.code, m.code)
			}
			if len(ms) > 1 {
				k := int64(len(ms))
				mean := memSample{
					supervisor: memUsage{Rss: sum.supervisor.Rss / k, Pss: sum.supervisor.Pss / k},
					qemu:       memUsage{Rss: sum.qemu.Rss / k, Pss: sum.qemu.Pss / k},
					guestRAM:   memUsage{Rss: sum.guestRAM.Rss / k, Pss: sum.guestRAM.Pss / k},
					code:       memUsage{Rss: sum.code.Rss / k, Pss: sum.code.Pss / k},
				}
				memRow(w, len(ms), "**mean**", mean)
			}
		}
		table(r.mem1)
		table(r.mem4)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "RSS and PSS from /proc/PID/smaps_rollup; the guest RAM is QEMU's anonymous mapping of exactly the guest's size, from /proc/PID/smaps. ")
		fmt.Fprintf(w, "The overhead is the supervisor plus QEMU less its guest RAM; PSS divides the pages the processes share (the sbx and QEMU binaries and libraries) among them.")
		if accel == qemu.AccelTCG {
			var code int64
			for _, m := range r.mem1 {
				code += m.code.Rss
			}
			fmt.Fprintf(w, " Under TCG, QEMU's RSS beyond guest RAM includes its translation buffer (the guest's code translated for the host): %s of %s with one sandbox.",
				mib(code/int64(len(r.mem1))), mib(r.mem1[0].beyondRAM().Rss))
		}
		fmt.Fprintf(w, "\n\n")
	}

	fmt.Fprintf(w, "### Raw samples\n\n")
	if r.warmRun > 0 {
		fmt.Fprintf(w, "- warm-up (not counted): bare QEMU first line %s, ready %s, exit %s; sbx run %s\n",
			vmbench.Seconds(r.warmBaseline.first), orNone(r.warmBaseline.ready, vmbench.Seconds), vmbench.Seconds(r.warmBaseline.exit), vmbench.Seconds(r.warmRun))
	}
	raw := func(name string, s vmbench.Samples, f func(time.Duration) string) {
		if len(s) > 0 {
			fmt.Fprintf(w, "- %s: %s\n", name, s.List(f))
		}
	}
	raw("bare QEMU, first console line", r.firstLines, vmbench.Seconds)
	raw("bare QEMU, ready line", r.readyLines, vmbench.Seconds)
	raw("bare QEMU, guest uptime at the ready line (its own clock)", r.guestUptime, vmbench.Seconds)
	raw("bare QEMU, exit", r.baseExits, vmbench.Seconds)
	raw("sbx run", r.sbxRuns, vmbench.Seconds)
	raw("exec through the supervisor", r.execSupervisor, vmbench.Millis)
	raw("sbx exec", r.execCLI, vmbench.Millis)
	for _, e := range r.execSupervisorFailed {
		fmt.Fprintf(w, "- failed exec through the supervisor: %s\n", oneLine(e))
	}
	for _, e := range r.execCLIFailed {
		fmt.Fprintf(w, "- failed sbx exec: %s\n", oneLine(e))
	}
	for _, ms := range [][]memSample{r.mem1, r.mem4} {
		for _, m := range ms {
			fmt.Fprintf(w, "- memory with %d running, %s: supervisor Rss %d Pss %d; QEMU Rss %d Pss %d; guest RAM Rss %d Pss %d; TCG buffer Rss %d (bytes)\n",
				len(ms), m.name, m.supervisor.Rss, m.supervisor.Pss, m.qemu.Rss, m.qemu.Pss, m.guestRAM.Rss, m.guestRAM.Pss, m.code.Rss)
		}
	}
}

func memRow(w io.Writer, running int, name string, m memSample) {
	q, o := m.beyondRAM(), m.overhead()
	cells := []string{
		fmt.Sprint(running), name,
		mib(m.supervisor.Rss), mib(m.supervisor.Pss),
		mib(q.Rss), mib(q.Pss), mib(m.guestRAM.Rss),
		mib(o.Rss), mib(o.Pss),
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// mib formats a byte count in MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
