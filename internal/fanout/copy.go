package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/policy/match"
)

// CopyStats says what CopyTree copied and how.
type CopyStats struct {
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"`
	// Cloned is how many of the files were reflinked (FICLONE) rather
	// than copied byte by byte.
	Cloned int `json:"cloned"`
	// Skipped counts what was left out: hidden and tmpfs paths, the
	// excluded directories and what is neither a directory, a regular
	// file nor a symbolic link (sockets, pipes, devices).
	Skipped int `json:"skipped"`
}

// modeBits are the bits of a mode a copy keeps.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// CopyTree copies the directory tree src to dst, which must not exist
// and whose parent the caller keeps private. Files are reflinked where
// the file system can (FICLONE), else copied; permission bits (setuid,
// setgid and sticky included) and modification times are kept, owners
// are the caller's. Symbolic links are copied as links, never followed,
// and src is read through an os.Root, so nothing outside it is read
// even if the tree changes meanwhile.
//
// Paths that rules classify as hidden or tmpfs are left out: the guest
// never sees their host content, so a copy served to it must not hold
// them (the file server hides them too; this is the second wall). So
// are the directories in exclude (absolute host paths), where they lie
// inside src: an eval's own results directory, for one. rules may be
// nil (copy everything but exclude). When ctx ends the copy stops with
// its error, leaving a partial dst for the caller to remove.
func CopyTree(ctx context.Context, src, dst string, rules *match.MountRules, exclude []string) (CopyStats, error) {
	c := &copier{ctx: ctx, rules: rules, exclude: map[string]bool{}}
	// The root itself may be a link (a mount's host directory written
	// as an absolute path through one): the file server follows it too.
	info, err := os.Stat(src)
	if err != nil {
		return c.st, err
	}
	if !info.IsDir() {
		return c.st, fmt.Errorf("%s is not a directory", src)
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return c.st, err
	}
	for _, ex := range exclude {
		rel, inside, err := within(real, ex)
		if err != nil {
			return c.st, err
		}
		if !inside {
			continue
		}
		if rel == "" {
			return c.st, fmt.Errorf("%s would be copied into itself", src)
		}
		c.exclude[rel] = true
	}
	if c.root, err = os.OpenRoot(src); err != nil {
		return c.st, err
	}
	defer c.root.Close()
	if err := c.dir("", dst, info); err != nil {
		return c.st, err
	}
	return c.st, nil
}

// within returns p relative to the directory base (slash-separated, ""
// for base itself) when p lies inside it, resolving links in p's
// existing part.
func within(base, p string) (string, bool, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	rel, err := filepath.Rel(base, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false, nil
	}
	if rel == "." {
		rel = ""
	}
	return filepath.ToSlash(rel), true, nil
}

type copier struct {
	ctx     context.Context
	root    *os.Root
	rules   *match.MountRules
	exclude map[string]bool
	noClone bool
	st      CopyStats
}

// skip reports whether the path rel is left out of the copy.
func (c *copier) skip(rel string) bool {
	if c.exclude[rel] {
		return true
	}
	if c.rules == nil {
		return false
	}
	switch c.rules.Classify(rel) {
	case match.Hidden, match.TmpfsPath:
		return true
	}
	return false
}

func dot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// dir copies the directory rel, whose Lstat is info, to dst.
func (c *copier) dir(rel, dst string, info fs.FileInfo) error {
	f, err := c.root.Open(dot(rel))
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil || !os.SameFile(st, info) {
		f.Close()
		return errors.Join(err, fmt.Errorf("%s changed while it was copied", dot(rel)))
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	c.st.Dirs++
	for _, e := range ents {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		crel := path.Join(rel, e.Name())
		if c.skip(crel) {
			c.st.Skipped++
			continue
		}
		ci, err := c.root.Lstat(crel)
		if err != nil {
			return err
		}
		cdst := filepath.Join(dst, e.Name())
		switch {
		case ci.IsDir():
			err = c.dir(crel, cdst, ci)
		case ci.Mode().IsRegular():
			err = c.file(crel, cdst, ci)
		case ci.Mode()&fs.ModeSymlink != 0:
			var target string
			if target, err = c.root.Readlink(crel); err == nil {
				err = os.Symlink(target, cdst)
				c.st.Symlinks++
			}
		default:
			c.st.Skipped++
		}
		if err != nil {
			return err
		}
	}
	// Last, so that a read-only directory could be filled, and its time
	// is not moved by the filling.
	if err := os.Chmod(dst, info.Mode()&modeBits); err != nil {
		return err
	}
	return os.Chtimes(dst, time.Time{}, info.ModTime())
}

// file copies the regular file rel, whose Lstat is info, to dst.
func (c *copier) file(rel, dst string, info fs.FileInfo) error {
	in, err := c.root.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil || !os.SameFile(st, info) {
		return errors.Join(err, fmt.Errorf("%s changed while it was copied", rel))
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	cloned := false
	if !c.noClone {
		switch err := cloneFile(out, in); {
		case err == nil:
			cloned = true
		case errors.Is(err, errNoClone):
			c.noClone = true
		}
	}
	if !cloned {
		// A failed clone wrote nothing; start from an empty file
		// anyway.
		if err := out.Truncate(0); err != nil {
			out.Close()
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fmt.Errorf("copying %s: %w", rel, err)
		}
	} else {
		c.st.Cloned++
	}
	c.st.Files++
	c.st.Bytes += info.Size()
	if err := out.Chmod(info.Mode() & modeBits); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, time.Time{}, info.ModTime())
}

// RemoveTree removes dir and everything in it, also what a guest left
// unwritable (a directory whose mode is 0): permissions are restored
// before removing. Links are never followed.
func RemoveTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
			if err != nil {
				// The directory could not be read: retry it now that
				// it can be.
				return filepath.WalkDir(p, func(q string, e fs.DirEntry, _ error) error {
					if e != nil && e.IsDir() {
						os.Chmod(q, 0o700)
					}
					return nil
				})
			}
		}
		return nil
	})
	return os.RemoveAll(dir)
}
