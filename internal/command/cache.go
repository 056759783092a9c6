package command

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

const cacheUsage = `
Usage: sbx cache list [-json]
       sbx cache prune [-max SIZE] [-all]

  Manage the machines saved for warm starts in the cache directory
  ($SBX_CACHE_DIR/snapshots, docs/warm-starts.md). The first start of a
  sandbox shape (its image, CPUs, memory, mounts' ports, the QEMU that
  runs it) boots a machine and saves it; every later start of that shape
  resumes from it. Snapshots are removed when they do not verify, and the
  least recently used go when they take more than the bound (4 GiB).

  list    Each snapshot: its key, image files, size, when it was made and
          last used. -json prints them as a JSON array.
  prune   Remove the least recently used snapshots until those left take
          at most -max (default 4GiB), or all of them with -all. Running
          sandboxes keep their memory and disk.

  Images are kept in the same cache; their files are shared by digest
  and are not listed here.
`

func runCache(_ context.Context, env *Env, args []string) int {
	var asJSON, all bool
	maxSize := "4GiB"
	flags := newFlagSet("cache")
	flags.BoolVar(&asJSON, "json", false, "")
	flags.StringVar(&maxSize, "max", maxSize, "")
	flags.BoolVar(&all, "all", false, "")
	var sub string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	pos, code, ok := parseArgs(env, flags, cacheUsage, args)
	if !ok {
		return code
	}
	if sub != "list" && sub != "prune" || len(pos) > 0 {
		usageError(env, "cache", "Invalid arguments", fmt.Sprintf("sbx cache takes list or prune, and no more arguments; got %s", quoteText(strings.Join(append([]string{sub}, pos...), " "))))
		return ExitError
	}
	v := newView(env, false)
	snaps, err := pipeline.OpenSnapshots(pipeline.Env{Environ: env.Environ})
	if err != nil {
		v.errorFrom("Cannot open the snapshot cache", err, false)
		return ExitError
	}
	defer snaps.Close()
	if sub == "prune" {
		limit, err := lang.ParseSize(maxSize)
		if err != nil {
			usageError(env, "cache", "Invalid -max", err.Error())
			return ExitError
		}
		if all {
			limit = 0
		}
		removed, err := snaps.Prune(limit)
		var freed int64
		for _, e := range removed {
			freed += e.Bytes
		}
		fmt.Fprintf(env.Stdout, "Removed %s (%s).\n", count(len(removed), "snapshot", "snapshots"), humanBytes(freed))
		if err != nil {
			v.errorFrom("Cannot prune the snapshot cache", err, false)
			return ExitError
		}
		return ExitOK
	}
	list, err := snaps.List()
	if err != nil {
		v.errorFrom("Cannot list the snapshot cache", err, false)
		return ExitError
	}
	if asJSON {
		type entry struct {
			Key      string    `json:"key"`
			Bytes    int64     `json:"bytes"`
			Created  time.Time `json:"created"`
			Used     time.Time `json:"used"`
			Kernel   string    `json:"kernel"`
			Disk     string    `json:"disk"`
			CPUs     int       `json:"cpus"`
			Memory   int64     `json:"memory"`
			Ports    []string  `json:"ports,omitempty"`
			Hypervis string    `json:"hypervisor"`
		}
		out := []entry{}
		for _, e := range list {
			s := e.Meta.Shape
			out = append(out, entry{e.Key, e.Bytes, e.Meta.Created, e.Used, s.Kernel, s.Disk, s.CPUs, s.Memory, s.Ports, s.Hypervisor})
		}
		return writeJSON(env, v, out)
	}
	if len(list) == 0 {
		fmt.Fprintf(env.Stderr, "No snapshots in %s: the first start of a sandbox shape saves one.\n", snaps.Dir())
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tDISK\tCPUS\tMEMORY\tPORTS\tSIZE\tCREATED\tUSED")
	var total int64
	for _, e := range list {
		s := e.Meta.Shape
		total += e.Bytes
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Key, abbrevDigest(s.Disk), dash(s.CPUs), sizeOrDash(s.Memory), len(s.Ports),
			humanBytes(e.Bytes), ago(e.Meta.Created), ago(e.Used))
	}
	tw.Flush()
	fmt.Fprintf(env.Stderr, "%s, %s in %s.\n", count(len(list), "snapshot", "snapshots"), humanBytes(total), snaps.Dir())
	return ExitOK
}

// abbrevDigest is a digest's first hex digits.
func abbrevDigest(d string) string {
	if _, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return hex[:12]
	}
	return orDash(d)
}

// ago says how long before now t was.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}
