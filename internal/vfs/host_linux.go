package vfs

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Host access. Every path the guest names is resolved by the kernel with
// openat2 below the mount's root with RESOLVE_NO_SYMLINKS: no symbolic
// link is followed in any component, so the path a rule was checked
// against is the path that is used — a symlink planted in the tree can
// neither lead outside the root nor around a hide rule. The last name
// is used with the *at system calls and no-follow flags, or opened with
// O_PATH|O_NOFOLLOW and reopened through /proc/self/fd, which reaches
// exactly the inode already checked. os.Root is not enough: it follows
// symbolic links that stay inside the root, and "link -> .git" would
// make ".git/config" reachable as "link/config".

const resolveFlags = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// openRoot opens the mount's host directory.
func openRoot(dir string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	// openat2 is what keeps symlinks from being followed; without it
	// (Linux before 5.6) there is no safe server.
	probe, err := unix.Openat2(fd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("openat2 with RESOLVE_NO_SYMLINKS (Linux 5.6 or later) is needed to serve %s: %w", dir, err)
	}
	unix.Close(probe)
	return fd, st, nil
}

// parentOf returns a directory descriptor and the name to use with the
// *at calls for rel; done releases the descriptor.
func (fs *fsys) parentOf(rel string) (dirfd int, name string, done func(), err error) {
	if rel == "" {
		return fs.root, ".", func() {}, nil
	}
	dir, name := splitRel(rel)
	if dir == "" {
		return fs.root, name, func() {}, nil
	}
	fd, err := unix.Openat2(fs.root, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolveFlags,
	})
	if err != nil {
		return -1, "", nil, err
	}
	return fd, name, func() { unix.Close(fd) }, nil
}

// lstat stats rel without following a link.
func (fs *fsys) lstat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dirfd, name, done, err := fs.parentOf(rel)
	if err != nil {
		return st, err
	}
	defer done()
	err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// pathFD opens rel itself with O_PATH (a link stays a link) and stats it.
func (fs *fsys) pathFD(rel string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	dirfd, name, done, err := fs.parentOf(rel)
	if err != nil {
		return -1, st, err
	}
	defer done()
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// reopen opens the inode an O_PATH descriptor holds, with flags. The
// magic link names the inode, not a path, so nothing is resolved again.
func reopen(fd int, flags int) (*os.File, error) {
	name := "/proc/self/fd/" + strconv.Itoa(fd)
	nfd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// procPath is the magic link of an O_PATH descriptor, for the calls that
// take a path and would otherwise follow a link at the end of one.
func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
