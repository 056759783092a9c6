package initsys

import (
	"os"
	"strings"
)

// MountFlags are the mount(2) flags the boot uses.
type MountFlags uint

// Mount flags.
const (
	ReadOnly MountFlags = 1 << iota
	NoSuid
	NoDev
	NoExec
	// Move moves an existing mount (source) to target.
	Move
	// Remount changes the flags of the mount at target.
	Remount
)

func (f MountFlags) String() string {
	var s []string
	for _, n := range []struct {
		f    MountFlags
		name string
	}{{ReadOnly, "ro"}, {NoSuid, "nosuid"}, {NoDev, "nodev"}, {NoExec, "noexec"}, {Move, "move"}, {Remount, "remount"}} {
		if f&n.f != 0 {
			s = append(s, n.name)
		}
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// Sys is the kernel interface the boot steps use beyond reading and
// writing files. Linux implements it with system calls; tests record the
// calls instead. Paths are absolute as the caller sees them: Boot joins
// them to Boot.Root first.
type Sys interface {
	// Mount mounts source of type fstype on target; see mount(2).
	Mount(source, target, fstype, data string, flags MountFlags) error
	// Unmount unmounts target, lazily when detach is set.
	Unmount(target string, detach bool) error
	// LoadModule loads the kernel module in f with the given parameters.
	// A module that is already loaded is an error satisfying
	// errors.Is(err, fs.ErrExist).
	LoadModule(f *os.File, params string) error
	// SwitchRoot makes newRoot, a mount point, the root of the file
	// system and the working directory, as switch_root(8) does.
	SwitchRoot(newRoot string) error
	// Sethostname sets the kernel's host name.
	Sethostname(name string) error
	// Sync flushes file system buffers.
	Sync()
	// PowerOff turns the machine off. On success it does not return.
	PowerOff() error
}
