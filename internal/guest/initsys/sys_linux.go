package initsys

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Linux returns the Sys of the running Linux kernel. Its calls act on
// the whole machine: only PID 1 of a guest should make them.
func Linux() Sys { return linuxSys{} }

type linuxSys struct{}

var _ Sys = linuxSys{}

func (linuxSys) Mount(source, target, fstype, data string, flags MountFlags) error {
	var f uintptr
	for _, m := range []struct {
		ours MountFlags
		unix uintptr
	}{
		{ReadOnly, unix.MS_RDONLY}, {NoSuid, unix.MS_NOSUID}, {NoDev, unix.MS_NODEV},
		{NoExec, unix.MS_NOEXEC}, {Move, unix.MS_MOVE}, {Remount, unix.MS_REMOUNT},
	} {
		if flags&m.ours != 0 {
			f |= m.unix
		}
	}
	return unix.Mount(source, target, fstype, f, data)
}

func (linuxSys) Unmount(target string, detach bool) error {
	flags := 0
	if detach {
		flags = unix.MNT_DETACH
	}
	return unix.Unmount(target, flags)
}

func (linuxSys) LoadModule(f *os.File, params string) error {
	err := unix.FinitModule(int(f.Fd()), params, 0)
	if !errors.Is(err, unix.ENOSYS) {
		return err
	}
	// Kernels before 3.8 have only init_module.
	image, rerr := io.ReadAll(f)
	if rerr != nil {
		return rerr
	}
	return unix.InitModule(image, params)
}

// SwitchRoot moves newRoot onto / and enters it, the way busybox's
// switch_root does: an initramfs is the rootfs itself, which pivot_root
// cannot move away.
func (linuxSys) SwitchRoot(newRoot string) error {
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("chdir %s: %w", newRoot, err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving %s onto /: %w", newRoot, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	return nil
}

func (linuxSys) Sethostname(name string) error { return unix.Sethostname([]byte(name)) }

func (linuxSys) Sync() { unix.Sync() }

func (linuxSys) PowerOff() error { return unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF) }
