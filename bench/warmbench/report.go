package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
)

// results are what one run measured; print reports whatever was filled
// in before a failure.
type results struct {
	n               int
	qemu            string
	cpus, hostCPUs  int
	memory          int64
	saved           sample
	files           []snapshotFile
	cold, warmFresh []sample
	warmLoaded      []sample
	batches         []batchResult
}

// answered, returned, took and part are a set of samples' figures.
func answered(ss []sample) vmbench.Samples {
	return part(ss, func(s sample) time.Duration { return s.answered })
}

func part(ss []sample, f func(sample) time.Duration) vmbench.Samples {
	out := make(vmbench.Samples, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// The parts of one start, in order (the breakdown's rows).
var parts = []struct {
	name string
	host bool // the host's own work, which does not run guest code
	f    func(sample) time.Duration
}{
	{"file servers and network, before the machine (`sandboxfs.Open`, `sandboxnet.New`)", true,
		func(s sample) time.Duration { return s.returned - s.started.Took }},
	{"snapshot lookup and verification: digests of state and disk, memory copied into a sealed memfd (`Started.Load`)", true,
		func(s sample) time.Duration { return s.started.Load }},
	{"machine directory, sockets, overlay (`Timings.Prepare`)", true,
		func(s sample) time.Duration { return s.started.Machine.Prepare }},
	{"QEMU's start to QMP (`Timings.Launch`)", true,
		func(s sample) time.Duration { return s.started.Machine.Launch }},
	{"state restore until the guest runs (`Timings.Restore`)", true,
		func(s sample) time.Duration { return s.started.Machine.Restore }},
	{"agent hello (`Timings.Agent`; a cold start's whole boot)", false,
		func(s sample) time.Duration { return s.started.Machine.Agent }},
	{"configure: identity, network, placeholders (`Started.Configure`)", false,
		func(s sample) time.Duration { return s.started.Configure }},
	{"the rest of Start (shape, identity)", true,
		func(s sample) time.Duration {
			m := s.started.Machine
			return s.started.Took - s.started.Load - m.Prepare - m.Launch - m.Restore - m.Agent - s.started.Configure
		}},
	{"first exec of `true`", false,
		func(s sample) time.Duration { return s.answered - s.returned }},
}

func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s; the sandbox has %d vCPU and %d MiB; host has %d CPUs\n", r.qemu, r.cpus, r.memory>>20, r.hostCPUs)
	if r.saved.answered == 0 {
		return
	}
	cold := answered(r.cold).Median()

	fmt.Fprintf(w, "\n| start → first exec of `true` answered | n | min | median | ÷ cold (medians) |\n| --- | ---: | ---: | ---: | ---: |\n")
	row := func(name string, ss []sample) {
		a := answered(ss)
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", name, len(a), vmbench.Seconds(a.Min()), vmbench.Seconds(a.Median()),
			vmbench.Ratio(a.Median().Seconds(), cold.Seconds()))
	}
	row("cold: booted", r.cold)
	row("warm, cache opened afresh (as a new process: snapshot verified, memory copied)", r.warmFresh)
	row("warm, cache already loaded in this process", r.warmLoaded)
	row("first start of the shape (Saved: boot, save, resume)", []sample{r.saved})

	fmt.Fprintf(w, "\n| snapshot | |\n| --- | ---: |\n")
	if len(r.warmFresh) > 0 {
		fmt.Fprintf(w, "| save: the first start less a warm one (fresh cache, median) | %s |\n",
			vmbench.Seconds(r.saved.answered-answered(r.warmFresh).Median()))
	}
	fmt.Fprintf(w, "| … the first start's boot, save and load (`Started.Save`) | %s |\n", vmbench.Seconds(r.saved.started.Save))
	var total int64
	for _, f := range r.files {
		fmt.Fprintf(w, "| `%s`: allocated on disk (apparent size) | %s (%s) |\n", f.name, mib(f.allocated), mib(f.size))
		total += f.allocated
	}
	fmt.Fprintf(w, "| all files, allocated | %s |\n", mib(total))

	if len(r.batches) > 0 {
		fmt.Fprintf(w, "\n| sandboxes started at once: until all answered a first exec | cold | warm (one cache) | warm ÷ cold |\n| ---: | ---: | ---: | ---: |\n")
		for _, k := range r.batchSizes() {
			c, wm := r.batch(k, false), r.batch(k, true)
			if c == nil || wm == nil {
				continue
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s |\n", k, vmbench.Seconds(c.all), vmbench.Seconds(wm.all), vmbench.Ratio(wm.all.Seconds(), c.all.Seconds()))
		}
		fmt.Fprintf(w, "\n| sandboxes at once, idle: QEMU memory per sandbox | cold PSS | warm PSS | warm ÷ cold | cold RSS | warm RSS | warm ÷ cold |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, k := range r.batchSizes() {
			c, wm := r.batch(k, false), r.batch(k, true)
			if c == nil || wm == nil || c.pss == 0 || wm.pss == 0 {
				continue
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", k, mib(c.pss), mib(wm.pss), vmbench.Ratio(float64(wm.pss), float64(c.pss)),
				mib(c.rss), mib(wm.rss), vmbench.Ratio(float64(wm.rss), float64(c.rss)))
		}
	}

	if len(r.warmFresh) > 0 {
		fmt.Fprintf(w, "\n| where a start's time goes (medians of each part) | warm, fresh cache | warm, loaded cache | cold | runs guest code |\n| --- | ---: | ---: | ---: | --- |\n")
		var hostFresh, hostLoaded time.Duration
		for _, p := range parts {
			f, l, c := part(r.warmFresh, p.f).Median(), part(r.warmLoaded, p.f).Median(), part(r.cold, p.f).Median()
			guest := "yes"
			if p.host {
				guest = "no"
				hostFresh += f
				hostLoaded += l
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", p.name, vmbench.Millis(f), vmbench.Millis(l), vmbench.Millis(c), guest)
		}
		fmt.Fprintf(w, "| total: Start's call to the exec's answer | %s | %s | %s | |\n",
			vmbench.Millis(answered(r.warmFresh).Median()), vmbench.Millis(answered(r.warmLoaded).Median()), vmbench.Millis(cold))
		fmt.Fprintf(w, "| … of which parts that run no guest code | %s | %s | | |\n", vmbench.Millis(hostFresh), vmbench.Millis(hostLoaded))
	}

	fmt.Fprintf(w, "\nRaw samples, start → first exec answered:\n")
	fmt.Fprintf(w, "  saved start: %s (Started %+v)\n", vmbench.Seconds(r.saved.answered), r.saved.started)
	for _, g := range []struct {
		name string
		ss   []sample
	}{{"cold", r.cold}, {"warm, fresh cache", r.warmFresh}, {"warm, loaded cache", r.warmLoaded}} {
		fmt.Fprintf(w, "  %s: %s\n", g.name, answered(g.ss).List(vmbench.Seconds))
		for _, s := range g.ss {
			fmt.Fprintf(w, "    returned %s, Started %+v\n", vmbench.Millis(s.returned), s.started)
		}
	}
	for _, br := range r.batches {
		fmt.Fprintf(w, "  %s batch of %d: all %s; each %s\n", kindName(br.warm), br.k, vmbench.Seconds(br.all), answered(br.samples).List(vmbench.Seconds))
	}
}

func (r *results) batchSizes() []int {
	var out []int
	for _, br := range r.batches {
		if len(out) == 0 || out[len(out)-1] != br.k {
			out = append(out, br.k)
		}
	}
	return out
}

func (r *results) batch(k int, warm bool) *batchResult {
	for i := range r.batches {
		if r.batches[i].k == k && r.batches[i].warm == warm {
			return &r.batches[i]
		}
	}
	return nil
}

// mib formats a byte count in MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
