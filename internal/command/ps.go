package command

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/internal/termtext"
)

const psUsage = `
Usage: sbx ps [options] [DIR]
       sbx ps -a [options]

  List the sandboxes that the state of the configuration in DIR (default:
  the current directory) records, and whether each still runs: its
  supervisor is asked, and a sandbox whose supervisor or VM died shows as
  "gone" with the reason, one whose guest agent does not answer within
  10 seconds (its commands would wait forever) as "unhealthy" ("sbx apply"
  re-creates both).

  With -a, list every sandbox supervisor directory of this user instead,
  whatever configuration it belongs to and whether or not a state still
  records it: the way to find a sandbox whose state was lost.

Options:

  -a                  All of this user's sandboxes, from the runtime directory.
  -json               Print a JSON array instead of a table.
`

const statusUsage = `
Usage: sbx status [options] [DIR] [SANDBOX]

  Show one sandbox in detail: whether it runs, its image, size, user, its
  supervisor and QEMU processes, the accelerator, when it started and
  where its logs are. Without SANDBOX, list every sandbox as "sbx ps"
  does.

Options:

  -json               Print JSON instead of text.
`

// sandboxStatus is one sandbox as ps and status show it.
type sandboxStatus struct {
	Address string `json:"address"`
	Status  string `json:"status"` // "running", "unhealthy" or "gone"
	Gone    string `json:"gone,omitempty"`
	// Unhealthy says why a sandbox whose supervisor runs cannot run
	// commands: its guest agent does not answer.
	Unhealthy  string `json:"unhealthy,omitempty"`
	Image      string `json:"image"`
	ImageHash  string `json:"image_hash"`
	CPUs       int    `json:"cpus,omitempty"`
	Memory     int64  `json:"memory,omitempty"`
	User       string `json:"user,omitempty"`
	Dir        string `json:"dir"`
	Pid        int    `json:"supervisor_pid"`
	QEMUPid    int    `json:"qemu_pid,omitempty"`
	OrphanQEMU int    `json:"orphan_qemu_pid,omitempty"`
	Accel      string `json:"accel,omitempty"`
	Started    string `json:"started,omitempty"`
	// Start says how the machine started ("cold", "warm" or "saved":
	// booted, resumed from a saved machine, or booted to save one and
	// then resumed), StartMillis how long it took, StartWarning why a
	// warm start was not made.
	Start        string `json:"start,omitempty"`
	StartMillis  int64  `json:"start_millis,omitempty"`
	StartWarning string `json:"start_warning,omitempty"`
	// Mounts is how the workspace mounts reach the guest ("virtiofs"
	// or "9p"), MountsNote why 9P when virtio-fs cannot run here.
	Mounts     string `json:"mounts,omitempty"`
	MountsNote string `json:"mounts_note,omitempty"`
	Console    string `json:"console_log"`
	Log        string `json:"supervisor_log"`
}

// liveSandboxes reads the state of dir (without its lock: nothing is
// written) and checks each recorded sandbox's processes, all at once: a
// sandbox whose agent does not answer takes Inspect's bound, and several
// such take it once.
func liveSandboxes(ctx context.Context, env *Env, dir string) ([]sandboxStatus, error) {
	st, err := state.Load(dir)
	if err != nil {
		return nil, err
	}
	var out []sandboxStatus
	var checks []func()
	for _, r := range st.Resources {
		if r.Sandbox == nil {
			continue
		}
		a := r.Sandbox
		out = append(out, sandboxStatus{Address: r.Address, Status: "gone", Gone: "state records no runtime", Image: addrs.ImageRef(a.Image).String(),
			ImageHash: a.ImageHash, CPUs: a.CPUs, Memory: a.Memory, User: a.User})
		if rt := a.Runtime; rt != nil {
			i, name := len(out)-1, r.Addr.Name
			checks = append(checks, func() { inspectInto(ctx, env, dir, name, rt, &out[i]) })
		}
	}
	var wg sync.WaitGroup
	for _, check := range checks {
		wg.Go(check)
	}
	wg.Wait()
	return out, nil
}

// inspectInto fills s with what Inspect finds of sandbox name, which
// state records as started with rt.
func inspectInto(ctx context.Context, env *Env, dir, name string, rt *state.Runtime, s *sandboxStatus) {
	s.Pid, s.QEMUPid, s.Accel, s.Started = rt.Pid, rt.QEMUPid, rt.Accel, rt.Started
	sdir, lv, err := apply.InspectSandbox(ctx, supervisor.RuntimeBase(env.Environ), dir, name, rt)
	if err != nil {
		s.Gone = err.Error()
		return
	}
	s.Dir = sdir
	s.Console, _ = supervisor.ConsolePath(sdir)
	s.Log = filepath.Join(sdir, supervisor.LogFile)
	s.OrphanQEMU = lv.OrphanQEMU
	switch {
	case lv.Running:
		s.Status, s.Gone = "running", ""
		if lv.Status != nil {
			s.QEMUPid = lv.Status.QEMUPid
			s.Start, s.StartMillis, s.StartWarning = lv.Status.Started, lv.Status.StartMillis, lv.Status.StartWarning
			s.Mounts, s.MountsNote = lv.Status.Mounts, lv.Status.MountsNote
		}
	case lv.Unhealthy != "":
		s.Status, s.Gone, s.Unhealthy = "unhealthy", "", lv.Unhealthy
		if lv.Status != nil {
			s.QEMUPid = lv.Status.QEMUPid
		}
	default:
		s.Gone = lv.Gone
	}
}

func runPs(ctx context.Context, env *Env, args []string) int {
	var asJSON, all bool
	flags := newFlagSet("ps")
	flags.BoolVar(&asJSON, "json", false, "")
	flags.BoolVar(&all, "a", false, "")
	pos, code, ok := parseArgs(env, flags, psUsage, args)
	if !ok {
		return code
	}
	if all {
		if len(pos) > 0 {
			usageError(env, "ps", "Invalid arguments", "-a lists every configuration's sandboxes: give no directory.")
			return ExitError
		}
		return listAll(ctx, env, asJSON)
	}
	dir, ok := dirArg(env, "ps", pos)
	if !ok {
		return ExitError
	}
	return listSandboxes(ctx, env, dir, asJSON)
}

func listSandboxes(ctx context.Context, env *Env, dir string, asJSON bool) int {
	v := newView(env, false)
	list, err := liveSandboxes(ctx, env, dir)
	if err != nil {
		v.errorDetail("Cannot read the state", err.Error())
		return ExitError
	}
	if asJSON {
		if list == nil {
			list = []sandboxStatus{}
		}
		return writeJSON(env, v, list)
	}
	if len(list) == 0 {
		fmt.Fprintf(env.Stderr, "No sandboxes: the state of %s records none. \"sbx apply\" starts them.\n", dir)
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SANDBOX\tSTATUS\tIMAGE\tCPUS\tMEMORY\tSUPERVISOR\tQEMU\tACCEL\tSTART\tUP")
	var notes []string
	for _, s := range list {
		live := s.Status == "running" || s.Status == "unhealthy"
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			termtext.Line(strings.TrimPrefix(s.Address, "sandbox.")), s.Status, termtext.Line(strings.TrimPrefix(s.Image, "image.")),
			dash(s.CPUs), sizeOrDash(s.Memory), pidOrDash(s.Pid, live), pidOrDash(s.QEMUPid, live || s.OrphanQEMU != 0),
			termtext.Line(orDash(s.Accel)), startText(s), uptime(s.Started, live))
		switch {
		case s.Gone != "":
			// The reason may quote the supervisor's error and the
			// VM's console.
			notes = append(notes, fmt.Sprintf("%s is gone: %s.", termtext.Line(s.Address), quoteText(s.Gone)))
		case s.Unhealthy != "":
			notes = append(notes, fmt.Sprintf("%s is unhealthy: %s.", termtext.Line(s.Address), quoteText(s.Unhealthy)))
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintf(env.Stderr, "\n%s\nRun \"sbx apply\" to re-create, or \"sbx destroy\" to clean up.\n", strings.Join(notes, "\n"))
	}
	return ExitOK
}

func runStatus(ctx context.Context, env *Env, args []string) int {
	var asJSON bool
	flags := newFlagSet("status")
	flags.BoolVar(&asJSON, "json", false, "")
	pos, code, ok := parseArgs(env, flags, statusUsage, args)
	if !ok {
		return code
	}
	dir, names := splitDirNames(pos)
	switch len(names) {
	case 0:
		return listSandboxes(ctx, env, dir, asJSON)
	case 1:
	default:
		usageError(env, "status", "Invalid arguments", fmt.Sprintf("sbx status takes [DIR] [SANDBOX]; got %s", quoteText(strings.Join(pos, " "))))
		return ExitError
	}
	v := newView(env, false)
	list, err := liveSandboxes(ctx, env, dir)
	if err != nil {
		v.errorDetail("Cannot read the state", err.Error())
		return ExitError
	}
	want := addrs.SandboxRef(strings.TrimPrefix(names[0], "sandbox.")).String()
	for _, s := range list {
		if s.Address != want {
			continue
		}
		if asJSON {
			return writeJSON(env, v, s)
		}
		w := env.Stdout
		fmt.Fprintf(w, "%s\n", v.bold(termtext.Line(s.Address)))
		row := func(k, val string) {
			if val != "" {
				fmt.Fprintf(w, "  %-12s %s\n", k+":", termtext.Line(val))
			}
		}
		if why := s.Gone + s.Unhealthy; why != "" {
			// The reason may quote the supervisor's error and the
			// VM's console: its lines go under a prefix.
			fmt.Fprintf(w, "  %-12s %s (%s)\n", "status:", s.Status, termtext.Block(why, "             "+quotePrefix))
		} else {
			row("status", s.Status)
		}
		row("image", s.Image+" "+abbrev(s.ImageHash))
		row("cpus", dash(s.CPUs))
		row("memory", sizeOrDash(s.Memory))
		row("user", s.User)
		if s.Pid != 0 {
			row("supervisor", fmt.Sprintf("pid %d", s.Pid))
		}
		if s.QEMUPid != 0 {
			row("qemu", fmt.Sprintf("pid %d, %s", s.QEMUPid, orDash(s.Accel)))
		}
		if s.Started != "" {
			row("started", s.Started+" ("+uptime(s.Started, true)+" ago)")
		}
		if s.Start != "" {
			row("start", startText(s))
		}
		if s.StartWarning != "" {
			row("warm start", s.StartWarning)
		}
		if s.Mounts != "" {
			row("mounts", mountsText(s))
		}
		row("directory", s.Dir)
		row("console", s.Console)
		row("log", s.Log)
		return ExitOK
	}
	v.errorDetail(fmt.Sprintf("No sandbox %q in the state of %s", names[0], dir), "\"sbx ps\" lists the sandboxes the state records.")
	return ExitError
}

func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pidOrDash(pid int, live bool) string {
	if pid == 0 || !live {
		return "-"
	}
	return fmt.Sprint(pid)
}

func sizeOrDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return humanBytes(n)
}

func abbrev(hash string) string {
	if i := strings.IndexByte(hash, ':'); i >= 0 && len(hash) > i+13 {
		return "(" + hash[:i+13] + "…)"
	}
	if hash == "" {
		return ""
	}
	return "(" + hash + ")"
}

// mountsText is how the mounts reach the guest, and why not over
// virtio-fs when they could not.
func mountsText(s sandboxStatus) string {
	if s.MountsNote == "" {
		return termtext.Line(s.Mounts)
	}
	return termtext.Line(s.Mounts + " (not virtio-fs: " + s.MountsNote + ")")
}

// uptime renders how long ago the RFC 3339 time started was.
func uptime(started string, live bool) string {
	t, err := time.Parse(time.RFC3339, started)
	if err != nil || !live {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Hour).String()
}

// runtimeEntry is one sandbox as "ps -a" shows it.
type runtimeEntry struct {
	Sandbox   string `json:"sandbox"`
	ConfigDir string `json:"config_dir"`
	Status    string `json:"status"` // "running", "unhealthy" or "gone"
	Gone      string `json:"gone,omitempty"`
	Unhealthy string `json:"unhealthy,omitempty"`
	Dir       string `json:"dir"`
	Pid       int    `json:"supervisor_pid,omitempty"`
	QEMUPid   int    `json:"qemu_pid,omitempty"`
	// Instance is the supervisor directory's name where it is not the
	// sandbox's (a Claude session's sandbox: "NAME-claude-<hash>"), and
	// LeasedTo who its lease names ("claude session ID").
	Instance string `json:"instance,omitempty"`
	LeasedTo string `json:"leased_to,omitempty"`
}

func listAll(ctx context.Context, env *Env, asJSON bool) int {
	v := newView(env, false)
	base := supervisor.RuntimeBase(env.Environ)
	list := []runtimeEntry{}
	for _, e := range supervisor.List(ctx, base) {
		r := runtimeEntry{Sandbox: e.Spec.Name, ConfigDir: e.Spec.ConfigDir, Status: "gone", Gone: e.Liveness.Gone, Dir: e.Dir}
		if e.Name != e.Spec.Name {
			r.Instance = e.Name
		}
		if l, err := supervisor.ReadLease(e.Dir); err == nil {
			r.LeasedTo = l.Holder
		}
		live := e.Liveness.Running || e.Liveness.Unhealthy != ""
		switch {
		case e.Liveness.Running:
			r.Status = "running"
		case live:
			r.Status, r.Gone, r.Unhealthy = "unhealthy", "", e.Liveness.Unhealthy
		}
		if st := e.Liveness.Status; st != nil && (live || e.Liveness.OrphanQEMU != 0) {
			r.Pid, r.QEMUPid = st.Pid, st.QEMUPid
			if !live {
				r.Pid = 0
			}
		}
		list = append(list, r)
	}
	if asJSON {
		return writeJSON(env, v, list)
	}
	if len(list) == 0 {
		fmt.Fprintf(env.Stderr, "No sandboxes under %s.\n", base)
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SANDBOX\tSTATUS\tSUPERVISOR\tQEMU\tCONFIGURATION")
	for _, r := range list {
		name := r.Sandbox
		if r.Instance != "" {
			name = r.Instance
		}
		if r.LeasedTo != "" {
			name += " (" + r.LeasedTo + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termtext.Line(name), r.Status, pidOrDash(r.Pid, r.Pid != 0), pidOrDash(r.QEMUPid, r.QEMUPid != 0), termtext.Line(orDash(r.ConfigDir)))
	}
	tw.Flush()
	return ExitOK
}

// startText says how a sandbox's machine started and how long it took:
// "warm 1.2s".
func startText(s sandboxStatus) string {
	if s.Start == "" {
		return "-"
	}
	return fmt.Sprintf("%s %.1fs", termtext.Line(s.Start), float64(s.StartMillis)/1000)
}
