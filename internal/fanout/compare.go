package fanout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"

	"github.com/sbx-dev/sbx/policy/match"
)

// What happened to a path, as Change.Change says it.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// Kinds of file, as Change.Type says them.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// Change is one path a run changed in a workspace mount.
type Change struct {
	// Path is the path in the guest: the mount's guest path joined with
	// the path inside the mount.
	Path string `json:"path"`
	// Change is Added, Modified or Deleted.
	Change string `json:"change"`
	// Type is what the path is now (what it was, when deleted): TypeFile,
	// TypeDir, TypeSymlink or TypeOther.
	Type string `json:"type"`

	rel string // the path inside the mount
}

// Compare lists what differs between the tree base and the tree run:
// paths only in run are added, paths only in base deleted (every path
// under a deleted directory too), and paths in both modified when their
// type, permission bits, content (a regular file's bytes, a link's
// target) differ. Times and owners are not compared: a guest cannot be
// trusted to move them, nor hidden from by them. Paths that rules hide or
// keep in memory are not compared (they are in neither tree). guest
// prefixes each Change's Path. The result is sorted by path.
//
// run is read through an os.Root and never follows a link, since the
// guest made it. A directory or file the guest left unreadable is made
// readable first (the copy is the caller's to remove anyway).
func Compare(base, run, guest string, rules *match.MountRules) ([]Change, error) {
	br, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	rr, err := os.OpenRoot(run)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	c := &comparer{base: br, run: rr, guest: guest, rules: rules}
	if err := c.dir(""); err != nil {
		return nil, err
	}
	slices.SortFunc(c.out, func(a, b Change) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	return c.out, nil
}

type comparer struct {
	base, run *os.Root
	guest     string
	rules     *match.MountRules
	out       []Change
}

func (c *comparer) add(rel, change string, info fs.FileInfo) {
	c.out = append(c.out, Change{Path: path.Join(c.guest, rel), Change: change, Type: typeOf(info), rel: rel})
}

func typeOf(info fs.FileInfo) string {
	switch {
	case info.IsDir():
		return TypeDir
	case info.Mode().IsRegular():
		return TypeFile
	case info.Mode()&fs.ModeSymlink != 0:
		return TypeSymlink
	}
	return TypeOther
}

func (c *comparer) skip(rel string) bool {
	if c.rules == nil {
		return false
	}
	switch c.rules.Classify(rel) {
	case match.Hidden, match.TmpfsPath:
		return true
	}
	return false
}

// names returns the sorted names in the directory rel of root, none when
// it is not there.
func names(root *os.Root, rel string) ([]string, error) {
	f, err := root.Open(dot(rel))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	ns, err := f.Readdirnames(-1)
	slices.Sort(ns)
	return ns, err
}

// readable makes the guest-made path rel of the run tree readable (and,
// for a directory, searchable) by its owner.
func readable(root *os.Root, rel string, info fs.FileInfo) error {
	want := fs.FileMode(0o400)
	if info.IsDir() {
		want = 0o700
	}
	if info.Mode()&fs.ModeSymlink != 0 || info.Mode().Perm()&want == want {
		return nil
	}
	return root.Chmod(dot(rel), info.Mode().Perm()|want)
}

// dir compares the directory rel, present in both trees.
func (c *comparer) dir(rel string) error {
	ri, err := c.run.Lstat(dot(rel))
	if err != nil {
		return err
	}
	if err := readable(c.run, rel, ri); err != nil {
		return err
	}
	bn, err := names(c.base, rel)
	if err != nil {
		return err
	}
	rn, err := names(c.run, rel)
	if err != nil {
		return err
	}
	all := append(slices.Clone(bn), rn...)
	slices.Sort(all)
	all = slices.Compact(all)
	for _, name := range all {
		crel := path.Join(rel, name)
		if c.skip(crel) {
			continue
		}
		inBase, inRun := slices.Contains(bn, name), slices.Contains(rn, name)
		switch {
		case inBase && inRun:
			err = c.both(crel)
		case inBase:
			err = c.only(c.base, crel, Deleted)
		default:
			err = c.only(c.run, crel, Added)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// only records rel, present in one tree, and everything under it.
func (c *comparer) only(root *os.Root, rel, change string) error {
	info, err := root.Lstat(rel)
	if err != nil {
		return err
	}
	if root == c.run {
		if err := readable(root, rel, info); err != nil {
			return err
		}
	}
	c.add(rel, change, info)
	if !info.IsDir() {
		return nil
	}
	ns, err := names(root, rel)
	if err != nil {
		return err
	}
	for _, n := range ns {
		crel := path.Join(rel, n)
		if c.skip(crel) {
			continue
		}
		if err := c.only(root, crel, change); err != nil {
			return err
		}
	}
	return nil
}

// both compares rel, present in both trees.
func (c *comparer) both(rel string) error {
	bi, err := c.base.Lstat(rel)
	if err != nil {
		return err
	}
	ri, err := c.run.Lstat(rel)
	if err != nil {
		return err
	}
	if err := readable(c.run, rel, ri); err != nil {
		return err
	}
	bt, rt := typeOf(bi), typeOf(ri)
	if bt != rt {
		// One entry for the path itself; what was under an old
		// directory is gone, what is under a new one added.
		c.add(rel, Modified, ri)
		for _, side := range []struct {
			root   *os.Root
			info   fs.FileInfo
			change string
		}{{c.base, bi, Deleted}, {c.run, ri, Added}} {
			if !side.info.IsDir() {
				continue
			}
			ns, err := names(side.root, rel)
			if err != nil {
				return err
			}
			for _, n := range ns {
				if crel := path.Join(rel, n); !c.skip(crel) {
					if err := c.only(side.root, crel, side.change); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	changed := bi.Mode()&modeBits != ri.Mode()&modeBits && bt != TypeSymlink
	switch bt {
	case TypeDir:
		if changed {
			c.add(rel, Modified, ri)
		}
		return c.dir(rel)
	case TypeSymlink:
		bl, err := c.base.Readlink(rel)
		if err != nil {
			return err
		}
		rl, err := c.run.Readlink(rel)
		if err != nil {
			return err
		}
		changed = bl != rl
	case TypeFile:
		if !changed {
			if changed, err = c.differ(rel, bi, ri); err != nil {
				return err
			}
		}
	}
	if changed {
		c.add(rel, Modified, ri)
	}
	return nil
}

// differ reports whether the regular file rel differs in content.
func (c *comparer) differ(rel string, bi, ri fs.FileInfo) (bool, error) {
	if bi.Size() != ri.Size() {
		return true, nil
	}
	bf, err := openRegular(c.base, rel, bi)
	if err != nil {
		return false, err
	}
	defer bf.Close()
	rf, err := openRegular(c.run, rel, ri)
	if err != nil {
		return false, err
	}
	defer rf.Close()
	const chunk = 64 << 10
	bb, rb := make([]byte, chunk), make([]byte, chunk)
	for {
		bn, berr := io.ReadFull(bf, bb)
		rn, rerr := io.ReadFull(rf, rb)
		if bn != rn || !bytes.Equal(bb[:bn], rb[:rn]) {
			return true, nil
		}
		if berr == io.EOF || berr == io.ErrUnexpectedEOF {
			// Same size, same bytes so far: the run's file ends here too
			// unless it grew, which Lstat's size rules out.
			return rerr != io.EOF && rerr != io.ErrUnexpectedEOF, nil
		}
		if berr != nil {
			return false, berr
		}
		if rerr != nil {
			return false, rerr
		}
	}
}

// openRegular opens rel of root, which Lstat said is the regular file
// info, and checks that it still is (no link followed).
func openRegular(root *os.Root, rel string, info fs.FileInfo) (*os.File, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !os.SameFile(st, info) {
		f.Close()
		return nil, errors.Join(err, fmt.Errorf("%s changed while it was read", rel))
	}
	return f, nil
}
