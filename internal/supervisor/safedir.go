package supervisor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// UnsafeError is the error for a runtime directory or file that another
// local user could control, which sbx refuses to use: a symbolic link
// where a directory of its own belongs, something owned by another user,
// or a directory others may write to.
type UnsafeError struct {
	Path    string
	Problem string // "is owned by uid 1001, not by you (uid 1000)"
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("supervisor: %s %s, so another user could control it; "+
		"set SBX_RUNTIME_DIR to a private directory of your own (mode 0700), or remove it", e.Path, e.Problem)
}

// secureDir checks dir, a directory sbx keeps sockets and files in, and
// every directory above it, so that no other local user can have made
// them, replace them or put anything in them:
//
//   - the last private components of dir (dir itself when private is 1;
//     base, hash directory and sandbox directory for SandboxDir's 3) must
//     be real directories (not symbolic links) owned by this user; one that
//     gives group or others any permission is set to 0700, since it is
//     this user's own;
//   - every component above them, and every component of the path it
//     resolves to, must be owned by this user or by root, and a directory
//     that others may write to must be sticky (as /tmp is), where only an
//     entry's owner can rename or remove it.
//
// With create, the missing directories are made, each with mode 0700 and
// checked as a private one (so that one another user made first is
// refused); without it, the check ends at the first missing one. A
// directory made on the way that vanishes before the next is made in it
// (Remove takes a configuration's directory with its last sandbox, while
// apply may be starting another of its sandboxes) starts the walk again,
// a few times at most.
func secureDir(dir string, private int, create bool) error {
	for attempt := 1; ; attempt++ {
		err := secureDirOnce(dir, private, create)
		// Walk again only when something on the way was not there:
		// the walk checks everything again, and a refusal of a
		// directory that stands is never retried.
		if err == nil || !create || attempt == maxVanished || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
}

// maxVanished bounds how often secureDir walks again after a directory
// on the way vanished.
const maxVanished = 16

// secureDirOnce is one walk of secureDir.
func secureDirOnce(dir string, private int, create bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	comps := components(abs)
	for i, p := range comps {
		isPrivate := i >= len(comps)-private
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if !create {
				return nil
			}
			if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("supervisor: %w", err)
			}
			// Made by this process or, in a race, by someone else:
			// either way it must pass as a private directory.
			if err := privateDir(p); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("supervisor: %w", err)
		}
		if isPrivate {
			if err := privateDir(p); err != nil {
				return err
			}
			continue
		}
		if err := trustedAncestor(p, fi); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("supervisor: %w", err)
			}
			for _, q := range components(real) {
				qi, err := os.Lstat(q)
				if err != nil {
					return fmt.Errorf("supervisor: %w", err)
				}
				if err := trustedAncestor(q, qi); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// components returns the absolute, clean path p and every directory above
// it, from the root down: /, /a, /a/b for /a/b.
func components(p string) []string {
	var out []string
	for {
		out = append(out, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// privateDir checks that path is a directory of this user's that no one
// else may use (see secureDir), setting the mode of one of its own to
// 0700.
func privateDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &UnsafeError{path, "is a symbolic link, not a directory"}
	case !fi.IsDir():
		return &UnsafeError{path, "is not a directory"}
	}
	if uid, me := fileOwner(fi), os.Geteuid(); uid != me {
		return &UnsafeError{path, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", uid, me)}
	}
	if fi.Mode().Perm()&0o077 != 0 || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		if err := os.Chmod(path, 0o700); err != nil {
			return fmt.Errorf("supervisor: making %s private: %w", path, err)
		}
	}
	return nil
}

// trustedAncestor checks a component above sbx's own directories: it is
// owned by this user or root, and if a directory others may write to, it
// is sticky.
func trustedAncestor(path string, fi fs.FileInfo) error {
	if uid, me := fileOwner(fi), os.Geteuid(); uid != me && uid != 0 {
		return &UnsafeError{path, fmt.Sprintf("is owned by uid %d, neither you (uid %d) nor root", uid, me)}
	}
	if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return &UnsafeError{path, fmt.Sprintf("may be written by other users (mode %v) and is not sticky", fi.Mode().Perm())}
	}
	return nil
}

// fileOwner returns the user id that owns the file fi describes.
func fileOwner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// openPrivate opens path, a file in a supervisor directory, without
// following a symbolic link (O_NOFOLLOW) or blocking on a FIFO, and
// refuses anything but a regular file of this user's. flag adds to
// O_NOFOLLOW; with O_CREATE the file is made with mode perm.
func openPrivate(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &UnsafeError{path, "is a symbolic link"}
		}
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &UnsafeError{path, "is not a regular file"}
	}
	if uid, me := fileOwner(fi), os.Geteuid(); uid != me {
		f.Close()
		return nil, &UnsafeError{path, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", uid, me)}
	}
	return f, nil
}

// readPrivate reads the file at path with openPrivate's checks.
func readPrivate(path string) ([]byte, error) {
	f, err := openPrivate(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	return b, nil
}
