package qcow2

import "io"

// extent is a byte range [off, end) of a raw image that may hold data.
type extent struct{ off, end int64 }

// dataExtents lists, in ascending order, the ranges of src within size that
// may hold data. Without help from the file system that is all of it.
func dataExtents(src io.ReaderAt, size int64) []extent {
	if size == 0 {
		return nil
	}
	if ext, ok := fileExtents(src, size); ok {
		return ext
	}
	return []extent{{0, size}}
}
