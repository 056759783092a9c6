package command

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/internal/termtext"
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
		fmt.Fprintln(env.Stderr, "sbx lock: -upgrade and -lockfile=readonly cannot be combined")
		return ExitError
	}
	v := newView(env, a.noColor)

	cfg, diags := lang.Load(a.dir, a.vars.options(env))
	v.diagnostics(sources(cfg), diags)
	if diags.HasErrors() {
		return ExitError
	}
	res := updateLock(ctx, env, v, cfg, a.upgrade, a.lockfile == "readonly", true)
	if res.failed {
		return failedOrInterrupted(ctx, env, "the lock file was left as it was")
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
//
// A lock file that cannot be parsed (a merge left conflict markers in it,
// say) is an error, unless repair is set and readonly is not: then the
// file is rebuilt from the pins that can still be read of it (see
// salvageLock). A lock file that cannot be read at all (a link out of its
// directory) is always an error.
func updateLock(ctx context.Context, env *Env, v *view, cfg *lang.Config, upgrade, readonly, repair bool) lockResult {
	read := func(path string) (*lockfiles.Lock, []byte, hcl.Diagnostics) {
		old, oldBytes, diags := readLock(path)
		if diags.HasErrors() && oldBytes != nil && repair && !readonly {
			// The file was read but cannot be parsed: rebuild it from
			// what can still be read of it.
			return salvageLock(v, cfg, oldBytes, path), oldBytes, nil
		}
		return old, oldBytes, diags
	}
	l, diags := pipeline.Lock(ctx, cfg, env.pipeline(), pipeline.LockOptions{Upgrade: upgrade, ReadOnly: readonly, Read: read})
	res := lockResult{path: l.Path, lock: l.Lock, changes: l.Changes, wrote: l.Wrote}
	v.diagnostics(l.Sources(), diags)
	if diags.HasErrors() {
		res.failed = true
		return res
	}
	if readonly && l.Differs {
		detail := "The lock file is read-only (-lockfile=readonly), but it is not up to date with the configuration:\n"
		for _, c := range l.Changes {
			detail += "  " + lockChangeLine(c) + "\n"
		}
		if len(l.Changes) == 0 {
			detail += "  its contents are not in the canonical form sbx writes\n"
		}
		detail += "\nRun \"sbx lock\" and commit " + lockfiles.FileName + "."
		v.errorDetail(fmt.Sprintf("%s needs changes", res.path), detail)
		res.failed = true
		return res
	}
	if !l.Wrote {
		return res
	}
	if l.Old == nil {
		v.println("Created %s:", res.path)
	} else {
		v.println("Updated %s:", res.path)
	}
	for _, c := range l.Changes {
		v.println("  %s", lockChangeLine(c))
	}
	return res
}

// salvageLock reads what it can of the lock file data, which Parse
// refused, prints what it keeps and drops, and returns the lock that
// `sbx lock` then brings up to date. An input that the two sides of a
// merge conflict pin differently keeps the one pin that matches the
// configuration (its platform, source string and kind); when none does,
// or both do (the same source resolved at different times), it is
// resolved again rather than guessed.
func salvageLock(v *view, cfg *lang.Config, data []byte, path string) *lockfiles.Lock {
	s := lockfiles.Salvage(data, path)
	why := "it cannot be parsed"
	if s.MarkerLine > 0 {
		why = fmt.Sprintf("it has git conflict markers (line %d)", s.MarkerLine)
	}
	v.println("%s cannot be read whole: %s. Rebuilding it from the configuration, keeping every pin that can still be read.", path, why)
	for _, d := range s.Dropped {
		v.println("  dropped %s", termtext.Line(d))
	}
	for _, c := range s.Conflicts {
		what := fmt.Sprintf("image.%s %s", c.Image, c.Key)
		img := cfg.Images[c.Image]
		var src *lang.Source
		if img != nil {
			for _, in := range recipe.Inputs(img) {
				if in.Key == c.Key {
					src = in.Source
				}
			}
		}
		if src == nil {
			v.println("  %s: pinned differently on the two sides of the conflict; the configuration no longer uses it", what)
			continue
		}
		var match []lockfiles.Candidate
		for _, cand := range c.Candidates {
			if cand.Platform == img.Platform.String() && cand.Pin.Source == src.Raw && cand.Pin.Kind == string(src.Kind) {
				match = append(match, cand)
			}
		}
		if len(match) != 1 {
			reason := "neither side's pin matches the configuration's source"
			if len(match) > 1 {
				reason = "both sides pin the configuration's source, to different content"
			}
			v.println("  %s: pinned differently on the two sides of the conflict and %s; resolving it again", what, reason)
			continue
		}
		entry := s.Lock.Images[c.Image]
		if entry.Platform == "" {
			entry.Platform = match[0].Platform
		}
		entry.Inputs[c.Key] = match[0].Pin
		v.println("  %s: pinned differently on the two sides of the conflict; keeping the pin of %s", what, termtext.Line(src.Raw))
	}
	for _, img := range s.Lock.Images {
		if img.Platform == "" {
			delete(s.Lock.Images, img.Name)
		}
	}
	return s.Lock
}

// readLock reads a lock file; a missing file is not an error (nil lock,
// nil bytes).
func readLock(path string) (*lockfiles.Lock, []byte, hcl.Diagnostics) {
	return pipeline.ReadLock(path)
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
