package operation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
)

// LockOptions say what UpdateLock may do.
type LockOptions struct {
	// Upgrade re-resolves every input (sbx lock -upgrade).
	Upgrade bool
	// ReadOnly writes nothing: any change the lock file needs is an
	// error (-lockfile=readonly).
	ReadOnly bool
	// Repair rebuilds a lock file that cannot be parsed from the pins
	// that can still be read of it (SalvageLock), unless ReadOnly.
	Repair bool
}

// LockResult is what UpdateLock did.
type LockResult struct {
	// Path is the lock file.
	Path string
	// Lock is the lock in force; nil on error.
	Lock *lockfiles.Lock
	// Changes are the pins that changed.
	Changes []resolve.LockChange
	// Wrote says the file was written; Old is the lock it replaced
	// (nil when there was no file).
	Wrote bool
	Old   *lockfiles.Lock
	// Repaired says the old file could not be parsed and was rebuilt
	// (LockOptions.Repair); Old is then what SalvageLock kept of it, and
	// Changes are relative to that.
	Repaired bool
	// Files are the sources the diagnostics refer to: the
	// configuration's and the lock file's.
	Files map[string]*hcl.File
}

// UpdateLock brings the lock file of cfg up to date, as sbx lock does:
// it resolves new and changed inputs (all of them with Upgrade) and
// writes the file if its bytes would change; the result says which pins
// changed, for the caller to show (LockChangeLine). With ReadOnly, any needed change is an error
// and nothing is written. On error the old file is untouched.
//
// A lock file that cannot be parsed (a merge left conflict markers in it,
// say) is an error, unless Repair is set and ReadOnly is not: then the
// file is rebuilt from the pins that can still be read of it (see
// SalvageLock). A lock file that cannot be read at all (a link out of its
// directory) is always an error.
func UpdateLock(ctx context.Context, env pipeline.Env, h Hooks, cfg *lang.Config, opts LockOptions) (LockResult, diags.Diagnostics) {
	repaired := false
	read := func(path string) (*lockfiles.Lock, []byte, hcl.Diagnostics) {
		old, oldBytes, d := pipeline.ReadLock(path)
		if d.HasErrors() && oldBytes != nil && opts.Repair && !opts.ReadOnly {
			// The file was read but cannot be parsed: rebuild it from
			// what can still be read of it.
			repaired = true
			return SalvageLock(h, cfg, oldBytes, path), oldBytes, nil
		}
		return old, oldBytes, d
	}
	l, hd := pipeline.Lock(ctx, cfg, env, pipeline.LockOptions{Upgrade: opts.Upgrade, ReadOnly: opts.ReadOnly, Read: read})
	res := LockResult{Path: l.Path, Lock: l.Lock, Changes: l.Changes, Wrote: l.Wrote, Old: l.Old, Repaired: repaired, Files: l.Sources()}
	ds := diags.Diagnostics{}.Append(hd)
	if ds.HasErrors() {
		res.Lock = nil
		if opts.ReadOnly && l.OldBytes != nil && !repaired {
			// Resolving failed (a registry or host that cannot be
			// reached, a version that does not exist), but what the lock
			// file lacks is known without it: say so, so that the check
			// still lists what differs.
			ds = ds.Append(staleList(res.Path, recipe.CheckLocked(cfg, l.Old)))
		}
		return res, ds
	}
	if opts.ReadOnly && l.Differs {
		detail := "The lock file is read-only (-lockfile=readonly), but it is not up to date with the configuration:\n"
		for _, c := range l.Changes {
			detail += "  " + LockChangeLine(c) + "\n"
		}
		if len(l.Changes) == 0 {
			detail += "  its contents are not in the canonical form sbx writes\n"
		}
		detail += "\nRun \"sbx lock\" and commit " + lockfiles.FileName + "."
		res.Lock = nil
		return res, ds.Append(diags.Sourceless(diags.Error, fmt.Sprintf("%s needs changes", res.Path), detail))
	}
	return res, ds
}

// staleList is the error of a read-only lock check that could not resolve
// the new pins: the lock file at path and the ways stale (CheckLocked's
// diagnostics) says it differs from the configuration. It is nil when
// stale is empty: then resolving found what differs, or nothing does.
func staleList(path string, stale hcl.Diagnostics) diags.Diagnostics {
	if !stale.HasErrors() {
		return nil
	}
	detail := "The lock file is read-only (-lockfile=readonly), and it is not up to date with the configuration:\n"
	for _, d := range stale {
		detail += "  " + strings.TrimSuffix(strings.TrimSuffix(d.Detail, "."), "; run `sbx lock`") + "\n"
	}
	detail += "\nThe new pins could not be resolved (see above). Run \"sbx lock\" where they can be, and commit " + lockfiles.FileName + "."
	return diags.Diagnostics{diags.Sourceless(diags.Error, fmt.Sprintf("%s is not up to date", path), detail)}
}

// SalvageLock reads what it can of the lock file data, which Parse
// refused, reports to h what it keeps and drops, and returns the lock
// that UpdateLock then brings up to date. An input that the two sides of
// a merge conflict pin differently keeps the one pin that matches the
// configuration (its platform, source string and kind); when none does,
// or both do (the same source resolved at different times), it is
// resolved again rather than guessed.
func SalvageLock(h Hooks, cfg *lang.Config, data []byte, path string) *lockfiles.Lock {
	s := lockfiles.Salvage(data, path)
	why := "it cannot be parsed"
	if s.MarkerLine > 0 {
		why = fmt.Sprintf("it has git conflict markers (line %d)", s.MarkerLine)
	}
	h.Message(fmt.Sprintf("%s cannot be read whole: %s. Rebuilding it from the configuration, keeping every pin that can still be read.", path, why))
	for _, d := range s.Dropped {
		h.Message("  dropped " + termtext.Line(d))
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
			h.Message(fmt.Sprintf("  %s: pinned differently on the two sides of the conflict; the configuration no longer uses it", what))
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
			h.Message(fmt.Sprintf("  %s: pinned differently on the two sides of the conflict and %s; resolving it again", what, reason))
			continue
		}
		entry := s.Lock.Images[c.Image]
		if entry.Platform == "" {
			entry.Platform = match[0].Platform
		}
		entry.Inputs[c.Key] = match[0].Pin
		h.Message(fmt.Sprintf("  %s: pinned differently on the two sides of the conflict; keeping the pin of %s", what, termtext.Line(src.Raw)))
	}
	for _, img := range s.Lock.Images {
		if img.Platform == "" {
			delete(s.Lock.Images, img.Name)
		}
	}
	return s.Lock
}

// LockSources makes a lock file's bytes available for diagnostic
// snippets, under its path and its base name.
func LockSources(data []byte, path string) map[string]*hcl.File {
	if data == nil {
		return nil
	}
	f := &hcl.File{Bytes: data}
	return map[string]*hcl.File{path: f, filepath.Base(path): f}
}

// withSources returns cfg's sources and more, the first winning.
func withSources(cfg map[string]*hcl.File, more map[string]*hcl.File) map[string]*hcl.File {
	m := maps.Clone(more)
	if m == nil {
		m = map[string]*hcl.File{}
	}
	maps.Copy(m, cfg)
	return m
}

// LockForApply returns the lock an apply, a build or a run uses: the
// lock file if it covers the configuration, or else (unless readOnly) the
// lock after resolving what it lacks, written back to the file
// (UpdateLock; the result says what changed). The result's Lock is nil on
// error.
func LockForApply(ctx context.Context, env pipeline.Env, h Hooks, cfg *lang.Config, readOnly bool) (LockResult, diags.Diagnostics) {
	path := filepath.Join(cfg.Dir, lockfiles.FileName)
	lock, data, hd := pipeline.ReadLock(path)
	res := LockResult{Path: path, Files: withSources(cfg.Sources, LockSources(data, path))}
	ds := diags.Diagnostics{}.Append(hd)
	if ds.HasErrors() {
		return res, ds
	}
	stale := recipe.CheckLocked(cfg, lock)
	if !stale.HasErrors() {
		res.Lock = lock
		return res, ds
	}
	if readOnly {
		return res, ds.Append(stale, diags.Sourceless(diags.Error, fmt.Sprintf("%s is not up to date with the configuration", path),
			"The lock file is read-only (-lockfile=readonly). Run \"sbx lock\" and commit "+lockfiles.FileName+"."))
	}
	res, ud := UpdateLock(ctx, env, h, cfg, LockOptions{})
	return res, ds.Append(ud)
}

// LockForPlan returns the lock file of cfg for a plan, which resolves
// nothing: a lock file that does not cover the configuration is an error
// saying to run `sbx lock`. Resolving would contact the registries the
// checkout names (an .npmrc in it can name any host) with the user's
// credentials, and plan runs on checkouts nobody has reviewed yet.
func LockForPlan(cfg *lang.Config) (*lockfiles.Lock, map[string]*hcl.File, diags.Diagnostics) {
	path := filepath.Join(cfg.Dir, lockfiles.FileName)
	lock, data, hd := pipeline.ReadLock(path)
	files := withSources(cfg.Sources, LockSources(data, path))
	ds := diags.Diagnostics{}.Append(hd)
	if ds.HasErrors() {
		return nil, files, ds
	}
	stale := recipe.CheckLocked(cfg, lock)
	if !stale.HasErrors() {
		return lock, files, ds
	}
	what := "is not up to date with the configuration"
	if data == nil {
		what = "does not exist"
	}
	return nil, files, ds.Append(stale, diags.Sourceless(diags.Error, fmt.Sprintf("%s %s", path, what),
		"Plan never resolves inputs: it reads the lock file as it is. Run \"sbx lock\" and commit "+lockfiles.FileName+"."))
}

// LockMissing reports whether cfg's directory has no lock file. A lock
// file that cannot be read is an error.
func LockMissing(cfg *lang.Config) (bool, diags.Diagnostics) {
	path := filepath.Join(cfg.Dir, lockfiles.FileName)
	_, err := lockfiles.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	case err != nil:
		return false, diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot read lock file", err.Error())}
	}
	return false, nil
}
