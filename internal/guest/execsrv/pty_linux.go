package execsrv

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal: the master side for the agent and
// the terminal side for the process. Both are close-on-exec; os/exec hands
// the terminal to the child as its stdio. The ioctls go through
// SyscallConn, since Fd would switch the master to blocking mode and lose
// read deadlines.
func openPTY() (master, tty *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var n uint32
	if err := control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlocking the terminal: %w", err)
		}
		var err error
		n, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN)
		if err != nil {
			return fmt.Errorf("getting the terminal's number: %w", err)
		}
		return nil
	}); err != nil {
		master.Close()
		return nil, nil, err
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	tty, err = os.OpenFile(name, os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// setWinsize sets a terminal's size; zero rows or columns leave it as it
// is.
func setWinsize(f *os.File, rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	return control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
