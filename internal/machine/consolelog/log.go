package consolelog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// DefaultMax is the size of each of a log's two files when none is given.
const DefaultMax = 8 << 20

// Rotated returns the name the log at path has once it is full: path
// with ".1".
func Rotated(path string) string { return path + ".1" }

// Writer writes a log of at most Max bytes per file, in two files: path
// and Rotated(path). It is not safe for concurrent use (Capture uses one
// from one goroutine).
type Writer struct {
	path string
	max  int64
	f    *os.File
	n    int64 // bytes in f
}

// Create begins a new log at path, of at most max bytes per file (zero
// or less means DefaultMax): path is created empty, or emptied, and a
// Rotated(path) left from before is removed. Neither may be a symbolic
// link. The files are readable by their owner only.
func Create(path string, max int64) (*Writer, error) {
	if max <= 0 {
		max = DefaultMax
	}
	if err := os.Remove(Rotated(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("console log: %w", err)
	}
	w := &Writer{path: path, max: max}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("console log: %w", err)
	}
	w.f, w.n = f, 0
	return nil
}

// Path returns the log's current file.
func (w *Writer) Path() string { return w.path }

// Max returns the most bytes each of the log's files holds.
func (w *Writer) Max() int64 { return w.max }

// Write appends p to the log, rotating it each time the current file
// holds Max bytes: the file is renamed to Rotated(path), replacing the
// one there, and a new one is begun. No file ever holds more than Max
// bytes.
func (w *Writer) Write(p []byte) (int, error) {
	var done int
	for len(p) > 0 {
		if w.f == nil {
			return done, fmt.Errorf("console log %s: closed", w.path)
		}
		if w.n >= w.max {
			if err := w.rotate(); err != nil {
				return done, err
			}
		}
		k := int(min(int64(len(p)), w.max-w.n))
		m, err := w.f.Write(p[:k])
		w.n += int64(m)
		done += m
		if err != nil {
			return done, fmt.Errorf("console log: %w", err)
		}
		p = p[k:]
	}
	return done, nil
}

func (w *Writer) rotate() error {
	err := w.f.Close()
	w.f = nil
	if rerr := os.Rename(w.path, Rotated(w.path)); err == nil {
		err = rerr
	}
	// A new file is begun even when the old one could not be kept, so
	// that the log goes on.
	if oerr := w.open(); oerr != nil {
		return errors.Join(err, oerr)
	}
	if err != nil {
		return fmt.Errorf("console log: rotating %s: %w", w.path, err)
	}
	return nil
}

// Close closes the log's current file.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Open opens the log file at path for reading, refusing a symbolic link
// and anything but a regular file, and returns it with its information.
func Open(path string) (*os.File, os.FileInfo, error) {
	return openLog(path)
}

func openLog(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, fi, nil
}

// CopyTail copies to w the last n bytes of the file at path (all of it
// when it is shorter), as long as it was when opened: what is appended
// meanwhile is not copied. It returns how many bytes it skipped at the
// file's start. Nothing but one buffer is held in memory, whatever the
// file's size.
func CopyTail(w io.Writer, path string, n int64) (skipped int64, err error) {
	f, fi, err := openLog(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	off := max(fi.Size()-max(n, 0), 0)
	_, err = io.Copy(w, io.NewSectionReader(f, off, fi.Size()-off))
	return off, err
}

// Tail returns the last n bytes of the log at path: of path, and of
// Rotated(path) before it when path holds fewer. A log that does not
// exist is empty. A rotation while Tail reads may repeat or leave out a
// part.
func Tail(path string, n int64) ([]byte, error) {
	var cur []byte
	if f, fi, err := openLog(path); err == nil {
		off := max(fi.Size()-n, 0)
		cur, err = io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
		f.Close()
		if err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	rest := n - int64(len(cur))
	if rest <= 0 {
		return cur, nil
	}
	f, fi, err := openLog(Rotated(path))
	if errors.Is(err, os.ErrNotExist) {
		return cur, nil
	}
	if err != nil {
		return cur, err
	}
	defer f.Close()
	off := max(fi.Size()-rest, 0)
	old, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return cur, err
	}
	return append(old, cur...), nil
}

// Move moves the log at src (src and Rotated(src)) to dst, replacing the
// log there, Rotated(dst) included (removed when src has none). Each
// file of at most max bytes (zero or less means DefaultMax) is renamed;
// of a larger one, or where renaming fails (dst on another file system),
// the last max bytes are copied, by way of a temporary file, and the
// original removed: a moved file never holds more than max bytes. A src
// that does not exist is not an error and leaves dst as it is.
func Move(src, dst string, max int64) error {
	if max <= 0 {
		max = DefaultMax
	}
	if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, p := range [][2]string{{Rotated(src), Rotated(dst)}, {src, dst}} {
		if err := moveFile(p[0], p[1], max); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func moveFile(src, dst string, max int64) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("console log: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("console log: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("console log: %s is not a regular file", src)
	}
	if fi.Size() <= max && os.Rename(src, dst) == nil {
		return nil
	}
	err = atomicfile.Write(dst, 0o600, func(f *os.File) error {
		_, err := CopyTail(f, src, max)
		return err
	})
	if err != nil {
		return fmt.Errorf("console log: %w", err)
	}
	os.Remove(src)
	return nil
}
