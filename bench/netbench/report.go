package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

// results are what a run measured; a run cut short prints what it has.
type results struct {
	size     int64
	requests int
	host     qemu.Host
	qemu     qemu.Binary
	hostCPUs int
	paths    []*pathResult // the sandbox network's, then the user-mode network's
}

// pathResult is what one network measured, its samples in the order
// taken.
type pathResult struct {
	name      string
	downloads vmbench.Samples // one download of size bytes each
	bursts    vmbench.Samples // one burst of requests small requests each
	execTrue  vmbench.Samples // exec round trips of true
}

// rate is a throughput as the progress log writes it.
func rate(n int64, d time.Duration) string { return fmt.Sprintf("%.1f MB/s", vmbench.MBps(n, d)) }

func (r *results) print(w io.Writer) {
	if len(r.paths) != 2 {
		return
	}
	sb, us := r.paths[0], r.paths[1]
	fmt.Fprintf(w, "## netbench\n\n")
	fmt.Fprintf(w, "%s; %d host CPUs; each guest has 1 vCPU and %d MiB.\n\n", vmbench.QEMU(r.host, r.qemu), r.hostCPUs, machineMemory>>20)

	fmt.Fprintf(w, "### From inside the guest: sandbox network vs QEMU's user-mode network (n = %d each, alternated, after one warm-up round)\n\n", len(sb.downloads))
	fmt.Fprintf(w, "| measurement | sandbox network | QEMU user-mode network (`-netdev user`) | sandbox ÷ user-mode |\n|---|---:|---:|---:|\n")
	dl := func(what string, pick func(vmbench.Samples) time.Duration) {
		a, b := vmbench.MBps(r.size, pick(sb.downloads)), vmbench.MBps(r.size, pick(us.downloads))
		fmt.Fprintf(w, "| download of %s with `wget -O /dev/null`, %s | %.1f MB/s | %.1f MB/s | %s |\n", vmbench.Size(r.size), what, a, b, vmbench.Ratio(a, b))
	}
	dl("median", vmbench.Samples.Median)
	dl("best", vmbench.Samples.Min)
	dl("worst", vmbench.Samples.Max)
	burst := func(what string, pick func(vmbench.Samples) time.Duration) {
		a, b := vmbench.PerSecond(r.requests, pick(sb.bursts)), vmbench.PerSecond(r.requests, pick(us.bursts))
		fmt.Fprintf(w, "| %d sequential `wget` of 1 KiB, a connection each, %s | %.1f requests/s | %.1f requests/s | %s |\n", r.requests, what, a, b, vmbench.Ratio(a, b))
	}
	burst("median", vmbench.Samples.Median)
	burst("best", vmbench.Samples.Min)
	burst("worst", vmbench.Samples.Max)
	fmt.Fprintf(w, "| exec round trip of `true` (included once in each timing above), median | %s | %s | |\n", vmbench.Millis(sb.execTrue.Median()), vmbench.Millis(us.execTrue.Median()))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Both guests boot the same image at once and take turns. Each download is busybox wget in the guest fetching zeros over plain HTTP from one Go server on the host's 127.0.0.1; the server checks that each body went out whole. ")
	fmt.Fprintf(w, "The sandbox network's guest fetches http://%s/ (port 80): its name is resolved by the sandbox's DNS (once per wget, so once per small request), the connection terminated by the egress engine, the request checked against the policy, audited, and sent again by the host to the server, which a hosts mapping names. ", benchHost)
	fmt.Fprintf(w, "The user-mode network's guest fetches http://%s:PORT/ (QEMU's slirp forwards it to the host's loopback) with no policy at all. ", userGateway)
	fmt.Fprintf(w, "Each timing is the host's, from sending the exec to its exit status; MB is 10^6 bytes. A ratio below 1× means the sandbox network is slower.\n\n")

	fmt.Fprintf(w, "### Raw samples\n\n")
	for _, p := range r.paths {
		if len(p.downloads) > 0 {
			fmt.Fprintf(w, "- %s, downloads of %s: %s\n", p.name, vmbench.Size(r.size), p.downloads.List(vmbench.Seconds))
		}
		if len(p.bursts) > 0 {
			fmt.Fprintf(w, "- %s, bursts of %d requests: %s\n", p.name, r.requests, p.bursts.List(vmbench.Seconds))
		}
		if len(p.execTrue) > 0 {
			fmt.Fprintf(w, "- %s, exec of true: %s\n", p.name, p.execTrue.List(vmbench.Millis))
		}
	}
}
