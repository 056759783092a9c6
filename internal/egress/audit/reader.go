package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// maxRead bounds how much of one log file Tail reads, and maxLine how
// long a line Follow waits to see the end of: both guard against a file
// that is not what the writer made.
const (
	maxRead = 256 << 20
	maxLine = 1 << 20
)

// followInterval is how often Follow looks for new entries.
var followInterval = 200 * time.Millisecond

// Stats counts what reading the log skipped.
type Stats struct {
	// Malformed counts lines that were not a JSON entry (a torn write, a
	// file edited by hand) and were skipped.
	Malformed int
}

// Tail returns the last n entries of the log in dir (all of them if n
// is negative), oldest first, reading the rotated file before the
// current one. Malformed lines are
// skipped (TailStats counts them); missing files are an empty log.
func Tail(dir string, n int) ([]Entry, error) {
	return TailStats(dir, n, nil)
}

// TailStats is Tail, adding the lines it skipped to st if st is not nil.
func TailStats(dir string, n int, st *Stats) ([]Entry, error) {
	if st == nil {
		st = new(Stats)
	}
	var all []Entry
	for _, name := range []string{File + ".1", File} {
		data, err := readLog(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for len(data) > 0 {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if e, ok := parseLine(line, st); ok {
				all = append(all, e)
				// Keep memory at about n entries on a large file.
				if n > 0 && len(all) >= 2*n {
					all = append(all[:0], all[len(all)-n:]...)
				}
			}
		}
	}
	if n >= 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return all, nil
}

func parseLine(line []byte, st *Stats) (Entry, bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return Entry{}, false
	}
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil || e.Decision == "" {
		st.Malformed++
		return Entry{}, false
	}
	return e, true
}

func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("reading audit log %s: refusing a symbolic link", path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reading audit log %s: %w", path, err)
	}
	return f, nil
}

func readLog(path string) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Read only the end of an overgrown file; the first line read may be
	// partial and is then counted as malformed.
	if fi.Size() > maxRead {
		if _, err := f.Seek(fi.Size()-maxRead, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, maxRead))
}

// Follow calls fn for each entry appended to the log in dir after Follow
// starts, in order, until ctx is done (then it returns nil) or fn returns
// an error (which it returns). It polls, waits for the file if it does
// not exist yet, and follows the writer across a rotation: it reads the
// renamed file to its end before turning to the new one. Malformed lines
// are skipped.
func Follow(ctx context.Context, dir string, fn func(Entry) error) error {
	return FollowStats(ctx, dir, fn, nil)
}

// FollowStats is Follow, adding the lines it skipped to st if st is not
// nil. st is only written from the goroutine calling FollowStats.
func FollowStats(ctx context.Context, dir string, fn func(Entry) error, st *Stats) error {
	if st == nil {
		st = new(Stats)
	}
	path := filepath.Join(dir, File)
	fo := &follower{st: st, fn: fn}
	defer fo.close()
	// Start at the current end: entries before it are Tail's.
	if err := fo.open(path, true); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	t := time.NewTicker(followInterval)
	defer t.Stop()
	for {
		if err := fo.poll(path); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type follower struct {
	st      *Stats
	fn      func(Entry) error
	f       *os.File
	ino     uint64
	off     int64
	partial []byte
	// skipping is set while the rest of an overlong line is discarded.
	skipping bool
	buf      []byte
}

func (fo *follower) close() {
	if fo.f != nil {
		fo.f.Close()
		fo.f = nil
	}
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

func (fo *follower) open(path string, atEnd bool) error {
	f, err := openNoFollow(path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	fo.close()
	fo.f, fo.ino, fo.off, fo.partial, fo.skipping = f, inode(fi), 0, nil, false
	if atEnd {
		fo.off = fi.Size()
	}
	return nil
}

// poll reads what was appended since the last poll, switching to a new
// current file after draining the old one.
func (fo *follower) poll(path string) error {
	if fo.f == nil {
		if err := fo.open(path, false); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
	}
	// Bounded: two files at most per poll (the rotated one and the new).
	for range 2 {
		if err := fo.drain(); err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		cur, err := fo.f.Stat()
		if err != nil {
			return err
		}
		if inode(fi) == fo.ino && fi.Size() >= cur.Size() {
			if cur.Size() < fo.off { // truncated in place
				fo.off, fo.partial = 0, nil
			}
			return nil
		}
		// Rotated: the old file is drained, the writer appends to a new one.
		if inode(fi) != fo.ino {
			// The writer may have appended to the old file between
			// the drain above and its rotation: it is complete now,
			// so read it to its end once more before leaving it.
			if err := fo.drain(); err != nil {
				return err
			}
			if len(fo.partial) > 0 && !fo.skipping {
				fo.st.Malformed++
			}
			// Rotated twice since the last poll: the file in between is
			// now the .1 one; read it whole before the current one. (Three
			// times, and the one in between is gone: Follow cannot see
			// entries the writer has already rotated away.)
			if err := fo.readMissed(path+".1", inode(fi)); err != nil {
				return err
			}
			if err := fo.open(path, false); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// readMissed reads the rotated file at path from its start if it is
// neither the file just drained nor the current one (cur).
func (fo *follower) readMissed(path string, cur uint64) error {
	fi, err := os.Lstat(path)
	if err != nil || inode(fi) == fo.ino || inode(fi) == cur {
		return nil
	}
	if err := fo.open(path, false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return fo.drain()
}

// drain reads the open file from off to its current end.
func (fo *follower) drain() error {
	if fo.buf == nil {
		fo.buf = make([]byte, 64<<10)
	}
	for {
		n, err := fo.f.ReadAt(fo.buf, fo.off)
		if n > 0 {
			fo.off += int64(n)
			if err := fo.lines(fo.buf[:n]); err != nil {
				return err
			}
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (fo *follower) lines(data []byte) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !fo.skipping && len(fo.partial)+len(data) > maxLine {
				// Not a line the writer makes: skip it to its newline.
				fo.st.Malformed++
				fo.skipping, fo.partial = true, fo.partial[:0]
			}
			if !fo.skipping {
				fo.partial = append(fo.partial, data...)
			}
			return nil
		}
		line := data[:i]
		data = data[i+1:]
		if fo.skipping {
			fo.skipping = false
			continue
		}
		if len(fo.partial) > 0 {
			line = append(fo.partial, line...)
			fo.partial = fo.partial[:0]
		}
		if e, ok := parseLine(line, fo.st); ok {
			if err := fo.fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}
