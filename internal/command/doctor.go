package command

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/hostcheck"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
)

// ExitWarnings: doctor found warnings and no failures.
const ExitWarnings = 2

const doctorUsage = `
Usage: sbx doctor [options] [DIR]

  Check that this machine can build and run sandboxes, and print for each
  problem the command that fixes it on this OS (with apt, dnf or
  Homebrew):

    qemu         the QEMU system emulator for this machine's architecture:
                 version 7.2 or later, the devices sbx's machines use
                 (virtio-blk, virtio-serial, virtio-rng, virtio-net) and
                 -netdev stream; qemu-ARCH for another architecture the
                 configuration's images use
    accel        hardware acceleration (KVM, HVF) proven with a test
                 guest, and why not when sandboxes must run under TCG
    mounts       how workspace mounts reach guests: virtio-fs where the
                 host has it (Linux, amd64, QEMU's vhost-user-fs-pci), 9P
                 elsewhere; SBX_MOUNT_TRANSPORT=9p or virtiofs chooses
    config       whether the configuration loads
    apt          for deb: sources: apt-get, apt-cache, package indexes, and
                 the packages (and versions) the spec names
    npm          for npm: sources: npm and the registry it names
    oci          for OCI references: registry credentials (the docker
                 config's credential helpers)
    bindings     your bindings file (SBX_BINDINGS, else
                 ~/.config/sbx/bindings.hcl): that sbx may read it, and
                 which source each secret of the configuration is read
                 from, with the block to add for one that has none; it
                 reads no value and runs no command
    runtime-dir  where supervisors keep their sockets: yours, mode 0700,
                 no symbolic link, short enough for socket paths
    cache-dir    the build cache: writable by you only, and its free space

  The configuration is DIR, or the current directory when it holds *.hcl
  files; without one only the host is checked. No registry or mirror is
  contacted and nothing is changed. The accelerator probe boots a tiny
  test guest, which takes a few seconds where KVM hangs guests.

Options:

  -json               Print the results as one JSON object:
                        {"format_version": "1",
                         "status": "ok" | "warn" | "fail",
                         "checks": [{"name": ..., "status": ...,
                                     "detail": ..., "fix": ...}]}
                      with the checks in the order above; "fix" is left
                      out when a check is ok.
` + varUsage + `  -no-color           Print without colour.

Exit codes: 0 every check is ok; 1 a check failed (or bad arguments);
2 warnings but no failures (sbx works, slower or less safely).
`

// doctorJSON is the -json output; its field names are part of the usage.
type doctorJSON struct {
	FormatVersion string             `json:"format_version"`
	Status        hostcheck.Status   `json:"status"`
	Checks        []hostcheck.Result `json:"checks"`
}

func runDoctor(ctx context.Context, env *Env, args []string) int {
	var (
		asJSON, noColor bool
		vars            varFlags
	)
	fs := newFlagSet("doctor")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&noColor, "no-color", false, "")
	vars.register(fs)
	pos, code, ok := parseArgs(env, fs, doctorUsage, args)
	if !ok {
		return code
	}
	dir, ok := dirArg(env, "doctor", pos)
	if !ok {
		return ExitError
	}
	v := newView(env, noColor)

	opts := hostcheck.Options{Environ: env.Environ, Keychain: env.Keychain}
	if len(pos) == 1 || hasSpecFiles(dir) {
		cfg, diags := lang.Load(dir, vars.options(env))
		if cfg.Dir == "" {
			cfg.Dir = dir
		}
		opts.Config = cfg
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				opts.ConfigErrors = append(opts.ConfigErrors, diagText(d))
			}
		}
	}
	results := hostcheck.Run(ctx, opts)
	if ctx.Err() != nil {
		fmt.Fprintln(env.Stderr, "Interrupted")
		return ExitInterrupted
	}
	worst := hostcheck.Worst(results)

	if asJSON {
		out, err := json.MarshalIndent(doctorJSON{FormatVersion: "1", Status: worst, Checks: results}, "", "  ")
		if err != nil {
			v.errorf("Cannot encode the results: %v", err)
			return ExitError
		}
		fmt.Fprintf(env.Stdout, "%s\n", out)
	} else {
		printDoctor(v, results)
	}
	switch worst {
	case hostcheck.Fail:
		return ExitError
	case hostcheck.Warn:
		return ExitWarnings
	}
	return ExitOK
}

// hasSpecFiles reports whether dir holds a *.hcl file other than a lock
// file or a var file.
func hasSpecFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.hcl"))
	for _, p := range m {
		if b := filepath.Base(p); b != "sbx.lock.hcl" && !strings.HasSuffix(b, ".vars.hcl") {
			return true
		}
	}
	return false
}

// diagText is one line for a diagnostic: its position, summary and the
// first line of its detail.
func diagText(d *hcl.Diagnostic) string {
	s := d.Summary
	if detail, _, _ := strings.Cut(strings.TrimSpace(d.Detail), "\n"); detail != "" {
		s += ": " + strings.TrimSuffix(detail, ".")
	}
	if d.Subject != nil {
		s = fmt.Sprintf("%s:%d: %s", d.Subject.Filename, d.Subject.Start.Line, s)
	}
	return s
}

// printDoctor prints one line per check, its fix on the next, and a
// summary.
func printDoctor(v *view, results []hostcheck.Result) {
	width := 0
	for _, r := range results {
		width = max(width, len(r.Name))
	}
	var warns, fails int
	for _, r := range results {
		switch r.Status {
		case hostcheck.Warn:
			warns++
		case hostcheck.Fail:
			fails++
		}
		status := fmt.Sprintf("%-4s", r.Status)
		v.println("%s  %-*s  %s", v.statusColor(r.Status, status), width, r.Name, termtext.Line(r.Detail))
		if r.Fix != "" {
			v.println("%s  %-*s  fix: %s", strings.Repeat(" ", 4), width, "", termtext.Line(r.Fix))
		}
	}
	v.println("")
	switch {
	case warns == 0 && fails == 0:
		v.println("%s", v.bold(fmt.Sprintf("All %d checks passed.", len(results))))
	case fails == 0:
		v.println("%s", v.bold(plural(warns, "warning")+"; sbx works, see the fixes above."))
	default:
		v.println("%s", v.bold(fmt.Sprintf("%s, %s.", plural(fails, "failure"), plural(warns, "warning"))))
	}
}

// statusColor colours a status word when stdout is coloured: green ok,
// yellow warn, red fail.
func (v *view) statusColor(st hostcheck.Status, s string) string {
	if !v.colorOut {
		return s
	}
	code := "32"
	switch st {
	case hostcheck.Warn:
		code = "33"
	case hostcheck.Fail:
		code = "31"
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}
