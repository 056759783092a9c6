package vfs

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxGitFile is the most of a ".git" file read: one "gitdir: <path>"
// line.
const maxGitFile = 8192

// maxHops bounds the links followed from a ".git" file or link to its
// git directory, as the kernel bounds a path's links.
const maxHops = 40

// scanGit finds, in the host tree as it is when the server starts, the
// git directories git on the host would use (see gitGuard). It walks
// every directory without following links, except inside a git
// directory, where only modules/ and worktrees/ can hold others; paths
// the mount keeps in memory are not the host's and are skipped.
func (fs *fsys) scanGit(hostDir string) *gitGuard {
	g := &gitGuard{pinned: map[string]bool{}}
	root := filepath.Clean(hostDir)
	fs.gitAbove(g, root)
	type dir struct {
		rel string
		// inGit: under a git directory's modules/ or worktrees/, where
		// only git directories are looked for.
		inGit bool
	}
	stack := []dir{{rel: ""}}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		type ent struct {
			name  string
			dtype uint8
		}
		// Only the directories and the names git looks at are kept, so
		// that a directory of many files costs no memory.
		var ents []ent
		err := fs.hostEntries(d.rel, func(name string, _ uint64, dtype uint8) error {
			if dtype == unix.DT_UNKNOWN {
				if st, err := fs.lstat(joinRel(d.rel, name)); err == nil {
					dtype = modeDType(st.Mode)
				}
			}
			switch name {
			case ".git", "HEAD", "commondir":
			default:
				if dtype != unix.DT_DIR {
					return nil
				}
			}
			ents = append(ents, ent{name, dtype})
			return nil
		})
		if err != nil {
			// Gone, or unreadable by the server, and so by the guest.
			continue
		}
		has := func(name string, isDir bool) bool {
			for _, e := range ents {
				if e.name == name {
					if isDir {
						return e.dtype == unix.DT_DIR
					}
					return e.dtype == unix.DT_REG || e.dtype == unix.DT_LNK
				}
			}
			return false
		}
		_, base := splitRel(d.rel)
		if d.rel == "" {
			base = filepath.Base(hostDir)
		}
		if gitDirShape(base, has) {
			g.dirs = append(g.dirs, d.rel)
			g.repo = true
			for _, e := range ents {
				if (e.name == "modules" || e.name == "worktrees") && e.dtype == unix.DT_DIR {
					stack = append(stack, dir{rel: joinRel(d.rel, e.name), inGit: true})
				}
			}
			continue
		}
		for _, e := range ents {
			rel := joinRel(d.rel, e.name)
			if e.name == ".git" && !d.inGit {
				g.repo = true
				g.pinned[rel] = true
				switch e.dtype {
				case unix.DT_REG:
					if target, ok := fs.readGitFile(rel); ok {
						fs.pinPath(g, root, d.rel, target)
					}
				case unix.DT_LNK:
					fs.pinPath(g, root, d.rel, e.name)
				}
			}
			if e.dtype != unix.DT_DIR || fs.rules.place(rel).inMem {
				continue
			}
			stack = append(stack, dir{rel: rel, inGit: d.inGit})
		}
	}
	return g
}

// gitAbove looks at the directories above the mount's root, as git's
// discovery does from a directory inside the mount: a ".git" in one of
// them makes the mount part of a work tree; one of them being a git
// directory puts the mount's root inside it.
func (fs *fsys) gitAbove(g *gitGuard, hostDir string) {
	real, err := filepath.EvalSymlinks(hostDir)
	if err != nil {
		real = hostDir
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			g.repo = true
			return
		}
		if hostGitDir(d) {
			rel, err := filepath.Rel(d, real)
			if err == nil {
				g.repo, g.inside, g.above = true, true, filepath.ToSlash(rel)
			}
			return
		}
		if d == filepath.Dir(d) {
			return
		}
	}
}

// hostGitDir reports whether the host directory d (outside the mount)
// has a git directory's shape.
func hostGitDir(d string) bool {
	return gitDirShape(filepath.Base(d), func(name string, dir bool) bool {
		fi, err := os.Lstat(filepath.Join(d, name))
		if err != nil {
			return false
		}
		if dir {
			return fi.IsDir()
		}
		return fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0
	})
}

// readGitFile reads the ".git" file rel and returns the path it names,
// as git's read_gitfile does: "gitdir: " and a path, relative to the
// file's directory unless absolute.
func (fs *fsys) readGitFile(rel string) (string, bool) {
	fd, err := unix.Openat2(fs.root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: resolveFlags,
	})
	if err != nil {
		return "", false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxGitFile))
	if err != nil {
		return "", false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	target, ok := strings.CutPrefix(strings.TrimRight(string(line), "\r \t"), "gitdir: ")
	return target, ok && target != ""
}

// pinPath follows target (a ".git" file's path or a link's target,
// relative to the directory dir of the mount) to the git directory it
// names, as the host's kernel would (root is the mount's host
// directory), link by link. Each link on the way
// is pinned, so that the guest cannot point it elsewhere; the directory
// reached becomes a git directory; a name missing on the way is pinned
// as well, so that the guest cannot make it. A path leaving the mount
// ends the walk: the guest cannot change what lies outside.
func (fs *fsys) pinPath(g *gitGuard, root, dir, target string) {
	cur := target
	if !filepath.IsAbs(cur) {
		cur = filepath.Join(root, filepath.FromSlash(dir), cur)
	}
	for hops := 0; hops <= maxHops; hops++ {
		rel, ok := relBelow(root, cur)
		if !ok {
			// The host directory as the kernel names it, when a link
			// leads to it (an absolute gitdir is written that way).
			if real, err := filepath.EvalSymlinks(root); err == nil {
				rel, ok = relBelow(real, cur)
			}
		}
		if !ok {
			return
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		names := split(rel)
		next := ""
		for i := range names {
			p := strings.Join(names[:i+1], "/")
			st, err := fs.lstat(p)
			if err != nil {
				// Missing (or unreadable): nothing the guest may make.
				g.pinned[p] = true
				return
			}
			if st.Mode&unix.S_IFMT != unix.S_IFLNK {
				continue
			}
			g.pinned[p] = true
			link, err := fs.readlink(p)
			if err != nil {
				return
			}
			parent, _ := splitRel(p)
			if filepath.IsAbs(link) {
				next = link
			} else {
				next = filepath.Join(root, filepath.FromSlash(parent), link)
			}
			next = filepath.Join(next, filepath.FromSlash(strings.Join(names[i+1:], "/")))
			break
		}
		if next == "" {
			// Reached: a git directory, if git would take it for one
			// (the walk finds it too, unless it lies where the walk
			// does not go).
			_, base := splitRel(rel)
			isGit := gitDirShape(base, func(name string, dir bool) bool {
				st, err := fs.lstat(joinRel(rel, name))
				if err != nil {
					return false
				}
				if dir {
					return st.Mode&unix.S_IFMT == unix.S_IFDIR
				}
				return st.Mode&unix.S_IFMT == unix.S_IFREG || st.Mode&unix.S_IFMT == unix.S_IFLNK
			})
			if st, err := fs.lstat(rel); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && isGit {
				g.dirs = appendNew(g.dirs, rel)
			}
			return
		}
		cur = next
	}
}

// relBelow returns p relative to root, when it lies below it.
func relBelow(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

func (fs *fsys) readlink(rel string) (string, error) {
	dirfd, base, done, err := fs.parentOf(rel)
	if err != nil {
		return "", err
	}
	defer done()
	buf := make([]byte, maxPath+1)
	n, err := unix.Readlinkat(dirfd, base, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// modeDType is the d_type of a file mode.
func modeDType(mode uint32) uint8 { return uint8((mode & unix.S_IFMT) >> 12) }
