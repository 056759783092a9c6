package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/providers/qemu"
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
	downloads samples // one download of size bytes each
	bursts    samples // one burst of requests small requests each
	execTrue  samples // exec round trips of true
}

// samples are the durations one measurement took, in the order taken.
type samples []time.Duration

// min returns the shortest sample, or 0 for none.
func (s samples) min() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Min(s)
}

// max returns the longest sample, or 0 for none.
func (s samples) max() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

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

func rate(n int64, d time.Duration) string { return fmt.Sprintf("%.1f MB/s", mbps(n, d)) }

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ratio returns a/b as "0.85×", or "n/a" when either is zero.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func millis(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// sizeString names a byte count in the largest binary unit that divides
// it.
func sizeString(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func (r *results) print(w io.Writer) {
	if len(r.paths) != 2 {
		return
	}
	sb, us := r.paths[0], r.paths[1]
	fmt.Fprintf(w, "## netbench\n\n")
	fmt.Fprintf(w, "QEMU %s (%s), accelerator %s", r.qemu.Version, r.qemu.Path, r.host.Accel("amd64"))
	if r.host.Note != "" {
		fmt.Fprintf(w, " (%s)", r.host.Note)
	}
	fmt.Fprintf(w, "; %d host CPUs; each guest has 1 vCPU and %d MiB.\n\n", r.hostCPUs, machineMemory>>20)

	fmt.Fprintf(w, "### From inside the guest: sandbox network vs QEMU's user-mode network (n = %d each, alternated, after one warm-up round)\n\n", len(sb.downloads))
	fmt.Fprintf(w, "| measurement | sandbox network | QEMU user-mode network (`-netdev user`) | sandbox ÷ user-mode |\n|---|---:|---:|---:|\n")
	dl := func(what string, pick func(samples) time.Duration) {
		a, b := mbps(r.size, pick(sb.downloads)), mbps(r.size, pick(us.downloads))
		fmt.Fprintf(w, "| download of %s with `wget -O /dev/null`, %s | %.1f MB/s | %.1f MB/s | %s |\n", sizeString(r.size), what, a, b, ratio(a, b))
	}
	dl("median", samples.median)
	dl("best", samples.min)
	dl("worst", samples.max)
	burst := func(what string, pick func(samples) time.Duration) {
		a, b := perSecond(r.requests, pick(sb.bursts)), perSecond(r.requests, pick(us.bursts))
		fmt.Fprintf(w, "| %d sequential `wget` of 1 KiB, a connection each, %s | %.1f requests/s | %.1f requests/s | %s |\n", r.requests, what, a, b, ratio(a, b))
	}
	burst("median", samples.median)
	burst("best", samples.min)
	burst("worst", samples.max)
	fmt.Fprintf(w, "| exec round trip of `true` (included once in each timing above), median | %s | %s | |\n", millis(sb.execTrue.median()), millis(us.execTrue.median()))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Both guests boot the same image at once and take turns. Each download is busybox wget in the guest fetching zeros over plain HTTP from one Go server on the host's 127.0.0.1; the server checks that each body went out whole. ")
	fmt.Fprintf(w, "The sandbox network's guest fetches http://%s/ (port 80): its name is resolved by the sandbox's DNS (once per wget, so once per small request), the connection terminated by the egress engine, the request checked against the policy, audited, and sent again by the host to the server, which a hosts mapping names. ", benchHost)
	fmt.Fprintf(w, "The user-mode network's guest fetches http://%s:PORT/ (QEMU's slirp forwards it to the host's loopback) with no policy at all. ", userGateway)
	fmt.Fprintf(w, "Each timing is the host's, from sending the exec to its exit status; MB is 10^6 bytes. A ratio below 1× means the sandbox network is slower.\n\n")

	fmt.Fprintf(w, "### Raw samples\n\n")
	for _, p := range r.paths {
		if len(p.downloads) > 0 {
			fmt.Fprintf(w, "- %s, downloads of %s: %s\n", p.name, sizeString(r.size), p.downloads.list(seconds))
		}
		if len(p.bursts) > 0 {
			fmt.Fprintf(w, "- %s, bursts of %d requests: %s\n", p.name, r.requests, p.bursts.list(seconds))
		}
		if len(p.execTrue) > 0 {
			fmt.Fprintf(w, "- %s, exec of true: %s\n", p.name, p.execTrue.list(millis))
		}
	}
}
