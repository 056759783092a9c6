package machine

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The seals a resumed machine's memory carries: nobody can write it,
// through any descriptor or shared mapping, nor change its size.
const memorySeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// SealMemory copies the saved RAM in src (a sparse file: its holes stay
// holes, and cost nothing) into a new memory file sealed against writes
// and resizing, which Options.Resume then maps. Each chunk read is
// handed to sum, which may be nil, with its offset: the caller checks
// the copy against the digest it recorded (a corrupt snapshot is caught
// as it is loaded).
//
// The seal is what makes one copy safe to share between machines:
// a guest that frees memory has QEMU give it back to the host, and QEMU
// older than 8.2 does that to a file-backed RAM by punching a hole in
// the file, even one it maps private, which would zero the pages of
// every other machine mapped from it. A sealed file refuses the punch.
func SealMemory(src *os.File, sum func(off int64, b []byte)) (*os.File, error) {
	fi, err := src.Stat()
	if err != nil {
		return nil, err
	}
	dst, err := newMemory(fi.Size())
	if err != nil {
		return nil, err
	}
	if err := copyMemory(dst, src, fi.Size(), sum); err != nil {
		dst.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(dst.Fd(), unix.F_ADD_SEALS, memorySeals); err != nil {
		dst.Close()
		return nil, fmt.Errorf("sealing the memory file: %w", err)
	}
	return dst, nil
}

// newMemory makes an empty memory file of size bytes.
func newMemory(size int64) (*os.File, error) {
	fd, err := unix.MemfdCreate("sbx-memory", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memory file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sbx-memory")
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, fmt.Errorf("memory file: %w", err)
	}
	return f, nil
}

// sharedMemory is the RAM of a machine whose file system backends map
// it (Options.FSSlots): a new memory file of size bytes, or, for a
// resumed machine, a writable copy of the saved memory, which only this
// machine maps (a vhost-user backend cannot see a private mapping's
// pages, so forks cannot share one copy then).
func sharedMemory(size int64, saved *os.File) (*os.File, error) {
	if saved == nil {
		return newMemory(size)
	}
	fi, err := saved.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() != size {
		return nil, fmt.Errorf("the saved memory is %d bytes, the machine's %d", fi.Size(), size)
	}
	f, err := newMemory(size)
	if err != nil {
		return nil, err
	}
	if err := copyMemory(f, saved, size, nil); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// copyMemory copies the data of the sparse file src, size bytes, into
// dst, leaving its holes holes, and hands each chunk read to sum (which
// may be nil) with its offset.
func copyMemory(dst, src *os.File, size int64, sum func(off int64, b []byte)) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(src.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", src.Name(), err)
		}
		hole, err := unix.Seek(int(src.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("reading %s: %w", src.Name(), err)
		}
		for pos := data; pos < hole; {
			n, err := src.ReadAt(buf[:min(int64(len(buf)), hole-pos)], pos)
			if n > 0 {
				if sum != nil {
					sum(pos, buf[:n])
				}
				if _, werr := dst.WriteAt(buf[:n], pos); werr != nil {
					return fmt.Errorf("memory file: %w", werr)
				}
				pos += int64(n)
			}
			if err != nil && !(errors.Is(err, io.EOF) && pos >= hole) {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("reading %s: %w", src.Name(), err)
			}
		}
		off = hole
	}
	return nil
}

// checkSealed refuses a resume's memory that could be written.
func checkSealed(f *os.File) error {
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_WRITE == 0 {
		return errors.New("the saved memory is not sealed against writes (SealMemory)")
	}
	return nil
}
