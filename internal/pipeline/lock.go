package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// LockOptions say what Lock may do with the lock file.
type LockOptions struct {
	// Upgrade re-resolves every input, not only new or changed ones
	// (sbx lock -upgrade).
	Upgrade bool
	// IfStale leaves a lock file that already pins everything the
	// configuration needs (recipe.CheckLocked) as it is and resolves
	// nothing, as building, planning and running do. Without it every pin
	// is checked against its source, as sbx lock does.
	IfStale bool
	// ReadOnly writes nothing. With IfStale, a lock file that lacks pins
	// is reported in Locked.Stale; without it, the lock that would be
	// written is resolved and Locked.Differs says whether the file would
	// change.
	ReadOnly bool
	// Read reads the lock file at path: its lock (nil when there is no
	// file), its bytes and diagnostics. Nil means ReadLock.
	Read func(path string) (*lockfiles.Lock, []byte, hcl.Diagnostics)
}

// Locked is what Lock found and did.
type Locked struct {
	// Path is the lock file, sbx.lock.hcl in the configuration directory.
	Path string
	// Old is the lock file's lock (nil when there was none), OldBytes its
	// bytes.
	Old      *lockfiles.Lock
	OldBytes []byte
	// Lock is the lock in force: Old when it was up to date, otherwise
	// the one resolved and written. It is nil when the lock file is not
	// up to date and ReadOnly kept it from being written, and on error.
	Lock *lockfiles.Lock
	// Changes are the pins that differ between Old and the lock
	// resolved, sorted by image and key.
	Changes []resolve.LockChange
	// Stale, with IfStale, says what the lock file lacks; it is empty
	// when the file covers the configuration.
	Stale hcl.Diagnostics
	// Differs says the lock file's bytes are not the resolved lock's
	// (changed pins, or not the canonical form sbx writes).
	Differs bool
	// Wrote says the lock file was written.
	Wrote bool

	sources map[string]*hcl.File
}

// Sources are the files Lock's diagnostics refer to, for snippets: the
// configuration's and the lock file's.
func (l *Locked) Sources() map[string]*hcl.File {
	return l.sources
}

// Lock brings the lock file of cfg up to date, as opts allow: it reads
// it, resolves what it lacks or what changed in the spec (every input
// with Upgrade) with env's clients, and writes it atomically when its
// bytes would change. On any error the file is left as it was. Errors
// are diagnostics: the lock file's at its own ranges, resolving's at the
// source's range in the spec.
func Lock(ctx context.Context, cfg *lang.Config, env Env, opts LockOptions) (*Locked, hcl.Diagnostics) {
	read := opts.Read
	if read == nil {
		read = ReadLock
	}
	l := &Locked{Path: filepath.Join(cfg.Dir, lockfiles.FileName), sources: maps.Clone(cfg.Sources)}
	if l.sources == nil {
		l.sources = map[string]*hcl.File{}
	}
	old, data, diags := read(l.Path)
	l.Old, l.OldBytes = old, data
	if data != nil {
		f := &hcl.File{Bytes: data}
		l.sources[l.Path], l.sources[filepath.Base(l.Path)] = f, f
	}
	if diags.HasErrors() {
		return l, diags
	}
	if opts.IfStale {
		if l.Stale = recipe.CheckLocked(cfg, old); !l.Stale.HasErrors() {
			l.Stale = nil
			l.Lock = old
			return l, diags
		}
		if opts.ReadOnly {
			return l, diags
		}
	}
	next, changes, rdiags := resolve.New(env.resolveOptions(cfg.Dir)).Lock(ctx, cfg, old, opts.Upgrade)
	diags = append(diags, rdiags...)
	if rdiags.HasErrors() {
		return l, diags
	}
	l.Changes = changes
	if data != nil && bytes.Equal(data, lockfiles.Marshal(next)) {
		l.Lock = next
		return l, diags
	}
	l.Differs = true
	if opts.ReadOnly {
		return l, diags
	}
	if err := lockfiles.Write(l.Path, next); err != nil {
		return l, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot write the lock file", Detail: err.Error()})
	}
	l.Lock, l.Wrote = next, true
	return l, diags
}

// ReadLock reads the lock file at path: its lock, its bytes (for
// diagnostics' snippets) and diagnostics. A missing file is not an
// error: the lock and bytes are nil.
func ReadLock(path string) (*lockfiles.Lock, []byte, hcl.Diagnostics) {
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
