package hostcheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/bindings"
)

// checkBindings reports on the user's bindings file (package bindings):
// that sbx may read it (a regular file of the user's that no one else
// may write, whose blocks parse) and, for a configuration, which source
// each of its sandboxes' secrets would be read from. It never reads a
// value and never runs a command: it only chooses, as a start would.
//
// A file sbx refuses fails. A secret with no source it may read (a spec
// naming none, or naming a command, with no binding of the user's for
// the configuration) warns: sbx works, but starting a sandbox that uses
// it fails, and the fix is the block to add.
func checkBindings(opts *Options) Result {
	r := Result{Name: "bindings"}
	f, diags := bindings.Find(opts.Environ)
	if diags.HasErrors() {
		r.Status = Fail
		r.Detail = diagText(diags)
		r.Fix = "correct the bindings file as the detail says, or unset " + bindings.EnvFile + " to use none"
		var unsafe *bindings.UnsafeError
		for _, d := range diags {
			if e, ok := d.Extra.(error); ok && unsafe == nil {
				errors.As(e, &unsafe)
			}
		}
		if unsafe != nil && unsafe.Fix != "" {
			r.Fix = unsafe.Fix
		}
		return r
	}
	var where string
	switch {
	case f == nil:
		where = "no bindings file"
	case f.Exists:
		where = f.ShortPath() + ": " + count(len(f.Bindings), "binding")
	default:
		where = "no bindings file at " + f.ShortPath() + " (it is optional: it says where this host reads secrets' values)"
	}
	r.Status, r.Detail = OK, where
	cfg := opts.Config
	if cfg == nil {
		return r
	}
	var chosen, unbound []string
	var fix string
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Sandboxes)) {
		sb := cfg.Sandboxes[name]
		for _, c := range bindings.ChooseAll(f, cfg.Dir, sb.Policy) {
			if seen[c.Secret] {
				continue
			}
			seen[c.Secret] = true
			var ue *bindings.UnboundError
			if errors.As(c.Err, &ue) {
				why := "names no source"
				if ue.SpecSource != "" {
					why = "names a command, which runs only from a binding"
				}
				unbound = append(unbound, fmt.Sprintf("secret.%s (sandbox.%s) %s", c.Secret, name, why))
				if fix == "" {
					fix = "add to " + bindingsPath(f) + ":\n" + strings.TrimRight(ue.Suggestion(), "\n")
				}
				continue
			}
			if c.Err != nil {
				unbound = append(unbound, fmt.Sprintf("secret.%s (sandbox.%s): %v", c.Secret, name, c.Err))
				continue
			}
			chosen = append(chosen, fmt.Sprintf("secret.%s from the %s (%s)", c.Secret, from(c.From), c.Kind()))
		}
	}
	if len(chosen) > 0 {
		r.Detail += "; " + strings.Join(chosen, ", ")
	}
	if len(unbound) > 0 {
		r.Status = Warn
		r.Detail += "; no source this host may read, so their sandboxes cannot start: " + strings.Join(unbound, "; ")
		r.Fix = fix
	}
	return r
}

func from(f bindings.From) string {
	if f == bindings.FromBindings {
		return "bindings file"
	}
	return "spec"
}

func bindingsPath(f *bindings.File) string {
	if f == nil {
		return "your bindings file"
	}
	return f.ShortPath()
}

// diagText joins the errors of diags as "summary: detail".
func diagText(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		s := d.Summary
		if d.Detail != "" {
			s += ": " + strings.TrimSuffix(d.Detail, ".")
		}
		if d.Subject != nil {
			s = fmt.Sprintf("%s:%d: %s", d.Subject.Filename, d.Subject.Start.Line, s)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
