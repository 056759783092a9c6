// Command modetool makes files with exact modes from inside the guest of
// TestGuestModesInVM, as install(1) and programs calling open(2) with
// O_CREAT do; the guest's busybox has no install, and its shell creates
// files 0666 less the umask. The umask is 0, so the mode given is the
// mode the guest's kernel sends.
//
//	modetool install MODE SRC DST   copy SRC to a new DST made 0600, then fchmod it to MODE
//	modetool create MODE PATH       open(PATH, O_CREAT|O_EXCL|O_WRONLY, MODE)
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "modetool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	syscall.Umask(0)
	if len(args) < 3 {
		return fmt.Errorf("usage: modetool install MODE SRC DST | create MODE PATH")
	}
	mode, err := strconv.ParseUint(args[1], 8, 32)
	if err != nil {
		return fmt.Errorf("mode %q: %w", args[1], err)
	}
	switch {
	case args[0] == "install" && len(args) == 4:
		src, err := os.Open(args[2])
		if err != nil {
			return err
		}
		defer src.Close()
		fd, err := syscall.Open(args[3], syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("create %s: %w", args[3], err)
		}
		dst := os.NewFile(uintptr(fd), args[3])
		defer dst.Close()
		if _, err := io.Copy(dst, src); err != nil {
			return err
		}
		if err := syscall.Fchmod(fd, uint32(mode)); err != nil {
			return fmt.Errorf("fchmod %s %o: %w", args[3], mode, err)
		}
		return dst.Close()
	case args[0] == "create" && len(args) == 3:
		fd, err := syscall.Open(args[2], syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, uint32(mode))
		if err != nil {
			return fmt.Errorf("create %s %o: %w", args[2], mode, err)
		}
		return syscall.Close(fd)
	}
	return fmt.Errorf("bad arguments %q", args)
}
