//go:build linux || darwin || freebsd

package qcow2

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// fileExtents asks the file system for the data ranges of src with
// SEEK_DATA and SEEK_HOLE. It reports false when src is not a file or the
// file system cannot tell.
func fileExtents(src io.ReaderAt, size int64) (ext []extent, ok bool) {
	f, isFile := src.(*os.File)
	if !isFile {
		return nil, false
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() < size {
		return nil, false // let the reads find what is wrong
	}
	saved, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false
	}
	defer f.Seek(saved, io.SeekStart)

	for off := int64(0); off < size; {
		data, err := f.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		}
		if err != nil {
			return nil, false
		}
		if data >= size {
			break
		}
		hole, err := f.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			return nil, false
		}
		hole = min(hole, size)
		if hole <= data {
			return nil, false
		}
		ext = append(ext, extent{data, hole})
		off = hole
	}
	return ext, true
}
