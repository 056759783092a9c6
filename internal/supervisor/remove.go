package supervisor

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/machine"
	"golang.org/x/sys/unix"
)

// dirFiles are the files sbx makes in a supervisor directory besides its
// machine directories and sockets (dirSockets); atomicfile's temporary
// files for them (".NAME.tmp-<digits>") count too.
var dirFiles = []string{SpecFile, StatusFile, LeaseFile, LeaseLockFile, LogFile, LogFile + ".1", ConsoleFile, ConsoleFile + ".1", audit.File, audit.File + ".1"}

// dirSockets are the sockets a supervisor listens on in its directory.
var dirSockets = []string{SocketFile, ControlFile}

// machineFiles are the files machine.Start makes in a machine directory.
var machineFiles = append([]string{
	machine.OverlayFile, machine.ConsoleFile, machine.ConsoleFile + ".1", machine.QEMULogFile,
	machine.QMPSocket, machine.AgentSocket, machine.CtlSocket, machine.NetSocket, machine.ConsoleSocket,
}, machine.PortSockets()...)

// clearDir removes from the supervisor directory dir what sbx makes in
// it, and nothing else: the sockets and the machine directories
// (sbx-<digits>, with the files a machine makes), and with all also the
// other files (dirFiles) and then dir itself. It follows no symbolic
// link: dir must be a directory itself, and an entry that is a link is
// removed as a link. A missing dir is not an error; entries it does not
// know are left, and when all is set they are an error naming them, with
// dir left in place.
func clearDir(dir string, all bool) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("supervisor: %s is not a directory (a symbolic link?); not removing anything through it", dir)
	case err != nil:
		return fmt.Errorf("supervisor: %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("supervisor: reading %s: %w", dir, err)
	}
	slices.Sort(names)
	var unknown []string
	for _, name := range names {
		switch {
		case slices.Contains(dirSockets, name):
			if !unlinkEntry(fd, name) {
				unknown = append(unknown, name)
			}
		case isMachineDirName(name):
			unknown = append(unknown, clearMachineDir(fd, name)...)
		case !all:
		case slices.Contains(dirFiles, name) || isTempOf(name, dirFiles):
			if !unlinkEntry(fd, name) {
				unknown = append(unknown, name)
			}
		default:
			unknown = append(unknown, name)
		}
	}
	if !all {
		return nil
	}
	if len(unknown) > 0 {
		return fmt.Errorf("supervisor: %s holds %s, which sbx did not make there; left it in place", dir, strings.Join(unknown, ", "))
	}
	// By path, but rmdir follows no link in its last component: a
	// directory swapped for a link since it was opened fails.
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("supervisor: removing %s: %w", dir, err)
	}
	return nil
}

// clearMachineDir removes the machine directory name in the directory
// parent (open as a file descriptor) with the files a machine makes in
// it (machineFiles, and the unix sockets it and QEMU listen on), and returns the entries it left ("sbx-1/x"). An entry name that is
// not a directory (a link) is removed itself.
func clearMachineDir(parent int, name string) []string {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		if unlinkEntry(parent, name) {
			return nil
		}
		return []string{name}
	}
	if err != nil {
		return []string{name}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return []string{name}
	}
	slices.Sort(names)
	var left []string
	for _, n := range names {
		if !(slices.Contains(machineFiles, n) || isSocket(fd, n)) || !unlinkEntry(fd, n) {
			left = append(left, name+"/"+n)
		}
	}
	if len(left) > 0 {
		return left
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return []string{name}
	}
	return nil
}

// unlinkEntry removes the entry name of the directory dirfd unless it is
// a directory (a link is removed, not followed), and reports whether it
// is gone.
func unlinkEntry(dirfd int, name string) bool {
	err := unix.Unlinkat(dirfd, name, 0)
	return err == nil || errors.Is(err, unix.ENOENT)
}

// isSocket reports whether the entry name of the directory dirfd is a
// unix socket (not a link to one).
func isSocket(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK
}

// isTempOf reports whether name is an atomicfile temporary file of one of
// names: ".NAME.tmp-<digits>".
func isTempOf(name string, names []string) bool {
	for _, n := range names {
		if digits, ok := strings.CutPrefix(name, "."+n+".tmp-"); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
			return true
		}
	}
	return false
}
