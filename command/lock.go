package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/builders/resolve"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/lockfiles"
)

const lockUsage = `
Usage: sbx lock [options] [DIR]

  Pin every input of every image in the configuration in DIR (default: the
  current directory) into DIR/sbx.lock.hcl: OCI digests, npm versions and
  integrity, URL and file hashes, Debian package versions, and each image's
  input hash. Inputs already pinned stay as they are unless their source
  changed in the spec; -upgrade re-resolves every input (newest version a
  tag, range or dist-tag names).

  The file is rewritten only when a pin changes, atomically; on any error
  it is left as it was.

Options:

  -upgrade            Re-resolve every input, not only new or changed ones.
  -lockfile=readonly  Change nothing: fail, listing what would change, if
                      the lock file is not up to date (for CI).
` + varUsage + `  -no-color            Print diagnostics without colour.
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
		fmt.Fprintln(env.Stderr, "sbx lock: -upgrade and -lockfile=readonly cannot be combined")
		return ExitError
	}
	v := newView(env, a.noColor)

	cfg, diags := lang.Load(a.dir, a.vars.options(env))
	v.diagnostics(sources(cfg), diags)
	if diags.HasErrors() {
		return ExitError
	}
	res := updateLock(ctx, env, v, cfg, a.upgrade, a.lockfile == "readonly")
	if res.failed {
		return ExitError
	}
	if !res.wrote && len(res.changes) == 0 {
		v.println("%s is up to date.", res.path)
	}
	return ExitOK
}

// lockResult is what updateLock did.
type lockResult struct {
	path    string
	lock    *lockfiles.Lock
	changes []resolve.LockChange
	wrote   bool
	failed  bool
}

// updateLock brings the lock file of cfg up to date: it resolves new and
// changed inputs (all of them with upgrade), prints what changed and writes
// the file if its bytes would change. With readonly, any needed change is
// an error and nothing is written. Errors are printed; on error the old
// file is untouched.
func updateLock(ctx context.Context, env *Env, v *view, cfg *lang.Config, upgrade, readonly bool) lockResult {
	res := lockResult{path: filepath.Join(cfg.Dir, lockfiles.FileName)}
	old, oldBytes, diags := readLock(res.path)
	v.diagnostics(lockSources(oldBytes, res.path), diags)
	if diags.HasErrors() {
		res.failed = true
		return res
	}

	set := resolve.New(resolve.Options{
		Dir:        cfg.Dir,
		Environ:    env.Environ,
		HTTPClient: env.HTTPClient,
		Keychain:   env.Keychain,
		OCIOptions: env.ociOptions(),
		Logger:     logger(env),
	})
	lock, changes, diags := set.Lock(ctx, cfg, old, upgrade)
	v.diagnostics(cfg.Sources, diags)
	if diags.HasErrors() {
		res.failed = true
		return res
	}
	res.lock, res.changes = lock, changes
	newBytes := lockfiles.Marshal(lock)
	if oldBytes != nil && bytes.Equal(oldBytes, newBytes) {
		return res
	}

	if readonly {
		detail := "The lock file is read-only (-lockfile=readonly), but it is not up to date with the configuration:\n"
		for _, c := range changes {
			detail += "  " + lockChangeLine(c) + "\n"
		}
		if len(changes) == 0 {
			detail += "  its contents are not in the canonical form sbx writes\n"
		}
		detail += "\nRun \"sbx lock\" and commit " + lockfiles.FileName + "."
		v.errorDetail(fmt.Sprintf("%s needs changes", res.path), detail)
		res.failed = true
		return res
	}

	if err := lockfiles.Write(res.path, lock); err != nil {
		v.errorDetail("Cannot write the lock file", err.Error())
		res.failed = true
		return res
	}
	res.wrote = true
	if old == nil {
		v.println("Created %s:", res.path)
	} else {
		v.println("Updated %s:", res.path)
	}
	for _, c := range changes {
		v.println("  %s", lockChangeLine(c))
	}
	return res
}

// readLock reads a lock file; a missing file is not an error (nil lock,
// nil bytes).
func readLock(path string) (*lockfiles.Lock, []byte, hcl.Diagnostics) {
	data, err := lockfiles.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read lock file", Detail: err.Error()}}
	}
	lock, diags := lockfiles.Parse(data, path)
	return lock, data, diags
}

// lockSources makes the lock file's bytes available for diagnostic
// snippets.
func lockSources(data []byte, path string) map[string]*hcl.File {
	if data == nil {
		return nil
	}
	f := &hcl.File{Bytes: data}
	return map[string]*hcl.File{path: f, filepath.Base(path): f}
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
