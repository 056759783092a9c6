package qcow2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// Create writes an empty qcow2 image of virtualSize bytes at path (64 KiB
// clusters), replacing any file there. Every cluster reads as zeros.
func Create(path string, virtualSize int64) error {
	return create(path, virtualSize, header{})
}

// CreateOverlay writes at path a qcow2 image with no data of its own over
// the backing image backingPath, whose format backingFormat is "raw" or
// "qcow2". Reads of clusters the overlay has not written go to the backing
// image; writes stay in the overlay.
//
// backingPath is stored as given: QEMU resolves a relative name against the
// overlay's directory. A virtualSize of 0 or less means the backing image's
// size (read from path's point of view, as QEMU will).
func CreateOverlay(path, backingPath, backingFormat string, virtualSize int64) error {
	h := header{backingFile: backingPath, backingFormat: backingFormat}
	if err := h.validate(int64(1) << DefaultClusterBits); err != nil {
		return err
	}
	if virtualSize <= 0 {
		size, err := backingSize(path, backingPath, backingFormat)
		if err != nil {
			return err
		}
		virtualSize = size
	}
	return create(path, virtualSize, h)
}

func create(path string, virtualSize int64, h header) error {
	g, err := newGeometry(virtualSize, Options{})
	if err != nil {
		return err
	}
	if err := h.validate(g.clusterSize); err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(f *os.File) error {
		return writeMetadata(f, newLayout(g, nil), h, nil)
	})
}

// backingSize returns the virtual size of the backing image as QEMU sees it
// from the overlay at overlayPath.
func backingSize(overlayPath, backingPath, format string) (int64, error) {
	p := backingPath
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(overlayPath), p)
	}
	f, err := os.Open(p)
	if err != nil {
		return 0, fmt.Errorf("qcow2: backing image: %w", err)
	}
	defer f.Close()
	if format == "raw" {
		fi, err := f.Stat()
		if err != nil {
			return 0, fmt.Errorf("qcow2: backing image: %w", err)
		}
		return fi.Size(), nil
	}
	size, err := ImageSize(f)
	if err != nil {
		return 0, fmt.Errorf("qcow2: backing image %s: %w", p, err)
	}
	return size, nil
}

// ImageSize returns the virtual size a qcow2 image's header gives.
func ImageSize(r io.ReaderAt) (int64, error) {
	var hdr [32]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("reading the header: %w", err)
	}
	if binary.BigEndian.Uint32(hdr[0:]) != magic {
		return 0, errors.New("not a qcow2 image")
	}
	return int64(binary.BigEndian.Uint64(hdr[24:])), nil
}
