package qcow2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/ctxio"
)

// chunkBytes is how much raw data Convert reads at a time.
const chunkBytes = 4 << 20

// Convert writes to dst a qcow2 image whose virtual disk holds the first
// size bytes of src. Clusters of src that are all zeros are left
// unallocated. dst should be empty: Convert writes every byte of the image
// but does not truncate what lies beyond it.
//
// When src is an *os.File, Convert asks the file system where its holes are
// and does not read them; the file's offset is restored afterwards. The
// image is the same either way.
//
// Once ctx ends, Convert returns its error at the next read of src or
// write to dst, each at most a few megabytes, and writes nothing more:
// dst then holds no image, and the caller discards it.
func Convert(ctx context.Context, dst io.WriterAt, src io.ReaderAt, size int64, opts Options) error {
	g, err := newGeometry(size, opts)
	if err != nil {
		return err
	}
	// Holes are asked of the file itself; reads and writes go through
	// the context.
	extents := dataExtents(src, size)
	src, dst = ctxio.ReaderAt(ctx, src), ctxio.WriterAt(ctx, dst)
	cs := g.clusterSize
	chunk := max(chunkBytes/cs, 1) * cs
	buf := make([]byte, chunk)
	zero := make([]byte, cs)

	var runs []run
	host := int64(1) // next free data cluster
	covered := int64(0)
	for _, e := range extents {
		// Whole clusters touched by the extent, less those already done.
		start := max(e.off/cs*cs, covered)
		end := min(ceilDiv(e.end, cs), ceilDiv(g.virtualSize, cs)) * cs
		for off := start; off < end; off += chunk {
			n := min(chunk, end-off)
			if err := readFull(src, buf[:n], off, size); err != nil {
				return err
			}
			// Keep the non-zero clusters, moved to the front of buf: they
			// are stored back to back, so one write puts them all.
			kept := int64(0)
			for c := int64(0); c < n; c += cs {
				cl := buf[c : c+cs]
				if bytes.Equal(cl, zero) {
					continue
				}
				if kept != c {
					copy(buf[kept:], cl)
				}
				kept += cs
				guest := (off + c) / cs
				if k := len(runs) - 1; k >= 0 && runs[k].guest+runs[k].n == guest {
					runs[k].n++
				} else {
					runs = append(runs, run{guest: guest, n: 1})
				}
			}
			if kept > 0 {
				if _, err := dst.WriteAt(buf[:kept], host*cs); err != nil {
					return fmt.Errorf("qcow2: writing data at %d: %w", host*cs, err)
				}
				host += kept / cs
			}
		}
		covered = max(covered, end)
	}
	return writeMetadata(dst, newLayout(g, runs), header{}, runs)
}

// readFull fills p from src at off. Bytes at or past size, the end of the
// raw image, read as zeros; a source shorter than size is an error.
func readFull(src io.ReaderAt, p []byte, off, size int64) error {
	want := int64(len(p))
	if off+want > size {
		want = max(size-off, 0)
		clear(p[want:])
	}
	n, err := src.ReadAt(p[:want], off)
	if int64(n) == want {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("qcow2: reading raw image at offset %d (size %d): %w", off+int64(n), size, err)
}

// ConvertFile converts the raw image at srcPath to a qcow2 image at
// dstPath. The image is written to a temporary file beside dstPath and
// renamed into place, so dstPath never holds a partial image: not when
// the conversion fails, nor when ctx ends (see Convert).
func ConvertFile(ctx context.Context, dstPath, srcPath string, opts Options) error {
	src, err := os.Open(srcPath)
	if err != nil {
		return fmt.Errorf("qcow2: %w", err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("qcow2: %w", err)
	}
	return atomicfile.Write(dstPath, 0o644, func(f *os.File) error {
		if err := Convert(ctx, f, src, fi.Size(), opts); err != nil {
			return fmt.Errorf("%w (converting %s)", err, srcPath)
		}
		return nil
	})
}
