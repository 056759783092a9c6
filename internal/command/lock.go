package command

import (
	"context"
	"log/slog"

	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/lang"
)

const lockUsage = `
Usage: sbx lock [options] [DIR]

  Pin every input of every image in the configuration in DIR (default: the
  current directory) into DIR/sbx.lock.hcl: OCI digests, npm versions and
  integrity, URL and file hashes, Debian package versions, and each image's
  input hash. Inputs already pinned stay as they are unless their source
  changed in the spec (a Debian package's pin also stays while its version
  satisfies the changed source); -upgrade re-resolves every input (newest
  version a tag, range or dist-tag names, apt's current candidate for a
  deb: source without an exact version).

  The file is rewritten only when a pin changes, atomically; on any error
  it is left as it was. A lock file that cannot be parsed (a merge left git
  conflict markers in it, or it was edited by hand) is rebuilt: every pin
  that can still be read is kept, an input the two sides of a conflict pin
  differently keeps the one pin that matches the configuration's source,
  and the rest is resolved again.

  npm packages are found through npm's configuration: npm_config_*
  variables, the project .npmrc in DIR and your ~/.npmrc. The project's
  .npmrc comes with the checkout: it must be a regular file inside DIR,
  and a ${VAR} in it is expanded only for the variables SBX_NPMRC_ENV
  names (comma-separated, e.g. SBX_NPMRC_ENV=NPM_TOKEN); any other is an
  error, since the project chooses where the value is sent.

  A URL input whose spec declares its sha256 is taken, without a
  download, from the directory SBX_MIRROR_DIR names when a file there
  (named as the URL names it, or by the sha256 in hex) has that sha256;
  builds do the same for the pinned sha256.

Options:

  -upgrade            Re-resolve every input, not only new or changed ones.
  -lockfile=readonly  Change nothing: fail, listing what would change, if
                      the lock file is not up to date (for CI).
` + varUsage + `  -no-color           Print diagnostics without colour.
`

type lockArgs struct {
	dir      string
	upgrade  bool
	lockfile lockfileMode
	vars     varFlags
	noColor  bool
}

func runLock(ctx context.Context, env *Env, args []string) int {
	var a lockArgs
	flags := newFlagSet("lock")
	flags.BoolVar(&a.upgrade, "upgrade", false, "")
	flags.Var(&a.lockfile, "lockfile", "")
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, lockUsage, args)
	if !ok {
		return code
	}
	if a.dir, ok = dirArg(env, "lock", pos); !ok {
		return ExitError
	}
	if a.upgrade && a.lockfile == "readonly" {
		newView(env, a.noColor).usageError("lock", "Conflicting options", "-upgrade and -lockfile=readonly cannot be combined.")
		return ExitError
	}
	v := newView(env, a.noColor)

	cfg, diags := lang.Load(a.dir, a.vars.options(env))
	v.diagnostics(sources(cfg), diags)
	if diags.HasErrors() {
		return ExitError
	}
	res, ds := operation.UpdateLock(ctx, env.pipeline(), newHooks(ctx, env, v), cfg, operation.LockOptions{
		Upgrade: a.upgrade, ReadOnly: a.lockfile == "readonly", Repair: true,
	})
	if !reportLock(v, res, ds) {
		return failedOrInterrupted(ctx, env, "the lock file was left as it was")
	}
	if !res.Wrote && len(res.Changes) == 0 {
		v.println("%s is up to date.", res.Path)
	}
	return ExitOK
}

// reportLock prints what operation.UpdateLock found and did: its
// diagnostics, then, when it wrote the lock file, each pin that changed
// (after a repair, each pin resolved again); never a heading over an
// empty list.
// It reports whether the lock is in force.
func reportLock(v *view, res operation.LockResult, ds diags.Diagnostics) bool {
	v.render(res.Files, ds)
	if ds.HasErrors() {
		// Without errors the lock may be nil: a configuration without
		// images needs no lock file.
		return false
	}
	if !res.Wrote {
		return true
	}
	switch {
	case res.Repaired && len(res.Changes) == 0:
		v.println("Repaired %s; no pin needed resolving again.", res.Path)
		return true
	case res.Repaired:
		v.println("Repaired %s, resolving again:", res.Path)
	case len(res.Changes) == 0:
		v.println("Rewrote %s; no pin changed.", res.Path)
		return true
	case res.Old == nil:
		v.println("Created %s:", res.Path)
	default:
		v.println("Updated %s:", res.Path)
	}
	for _, c := range res.Changes {
		v.println("  %s", operation.LockChangeLine(c))
	}
	return true
}

// logger returns the logger library packages report progress to: text on
// stderr when SBX_LOG is debug or info, otherwise nothing.
func logger(env *Env) *slog.Logger {
	var level slog.Level
	switch lv, _ := env.getenv("SBX_LOG"); lv {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	default:
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
}
