package guestcfg

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// SetIdentity gives the running kernel id: its host name, its clock
// (CLOCK_REALTIME), and id.Entropy mixed into its random pool, credited
// in full, followed by a reseed of the pool's generator, so that what
// the guest draws from now on owes nothing to the state it was resumed
// from. It needs root (CAP_SYS_ADMIN, CAP_SYS_TIME).
func SetIdentity(id agentproto.Identity) error {
	if id.Hostname != "" {
		if err := unix.Sethostname([]byte(id.Hostname)); err != nil {
			return fmt.Errorf("guestcfg: setting the host name: %w", err)
		}
	}
	if id.TimeUnixNano > 0 {
		ts := unix.NsecToTimespec(id.TimeUnixNano)
		if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
			return fmt.Errorf("guestcfg: setting the clock: %w", err)
		}
	}
	if len(id.Entropy) > 0 {
		if err := addEntropy(id.Entropy); err != nil {
			return fmt.Errorf("guestcfg: adding entropy: %w", err)
		}
	}
	return nil
}

// addEntropy writes b into the kernel's pool with RNDADDENTROPY, which
// credits it (a plain write to /dev/random would not), then asks for a
// reseed with RNDRESEEDCRNG.
func addEntropy(b []byte) error {
	f, err := os.OpenFile("/dev/random", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	req := make([]byte, 8+len(b))
	*(*int32)(unsafe.Pointer(&req[0])) = int32(len(b) * 8)
	*(*int32)(unsafe.Pointer(&req[4])) = int32(len(b))
	copy(req[8:], b)
	if err := ioctl(f, unix.RNDADDENTROPY, unsafe.Pointer(&req[0])); err != nil {
		return fmt.Errorf("RNDADDENTROPY: %w", err)
	}
	if err := ioctl(f, unix.RNDRESEEDCRNG, nil); err != nil {
		return fmt.Errorf("RNDRESEEDCRNG: %w", err)
	}
	return nil
}

func ioctl(f *os.File, req uint, arg unsafe.Pointer) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno unix.Errno
	if err := c.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
