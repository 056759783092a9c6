//go:build linux

package fanout

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errNoClone says the file system cannot reflink; copy instead.
var errNoClone = errors.New("reflinks are not supported here")

// cloneFile makes out share in's blocks (FICLONE), so that the copy
// costs no space until one side is written.
func cloneFile(out, in *os.File) error {
	err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.EINVAL),
		errors.Is(err, unix.ENOTTY), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EBADF):
		return errNoClone
	}
	return err
}
