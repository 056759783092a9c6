package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for Options.
const (
	DefaultMaxSize = 8 << 20
	DefaultBuffer  = 4096
)

// Options tunes a Writer. The zero value is the default.
type Options struct {
	// MaxSize is the size past which egress.jsonl is rotated to
	// egress.jsonl.1 (replacing it), so the log takes at most about
	// twice MaxSize on disk. Default DefaultMaxSize.
	MaxSize int64
	// Buffer is how many entries may wait for the disk before Log starts
	// dropping them. Default DefaultBuffer.
	Buffer int
	// Sandbox, when set, fills Entry.Sandbox on entries without one.
	Sandbox string
}

// Writer appends entries to a sandbox's audit log from a goroutine of its
// own. Log is safe for concurrent use and never waits for the disk.
type Writer struct {
	opts Options
	// dir is the directory the log was opened in: every later open and
	// rename is relative to it, so a directory swapped for a link after
	// Open changes nothing.
	dir *os.File

	mu     sync.RWMutex // guards closed against Log sending on a closed ch
	closed bool
	ch     chan Entry

	dropped atomic.Int64
	done    chan struct{}
	err     error // first write error, read after done
}

// Open opens dir/egress.jsonl for appending, creating it mode 0600. It
// refuses a symbolic link or a non-regular file there, and a file owned
// by another user: the guest cannot reach the supervisor's directory,
// but another local user might have planted a link to a file of the
// user's to clobber.
func Open(dir string, opts Options) (*Writer, error) {
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	f, size, err := openLog(d)
	if err != nil {
		d.Close()
		return nil, err
	}
	w := &Writer{
		opts: opts,
		dir:  d,
		ch:   make(chan Entry, opts.Buffer),
		done: make(chan struct{}),
	}
	go w.run(f, size)
	return w, nil
}

// openLog opens the current log file in dir for appending. O_NOFOLLOW
// refuses a link at the name (os.Root would follow one that stays
// inside the directory); O_NONBLOCK keeps a FIFO there from hanging the
// supervisor until it is refused as not a regular file.
func openLog(dir *os.File) (*os.File, int64, error) {
	path := filepath.Join(dir.Name(), File)
	fd, err := unix.Openat(int(dir.Fd()), File, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if err == unix.ELOOP {
			return nil, 0, fmt.Errorf("opening audit log %s: refusing a symbolic link", path)
		}
		return nil, 0, fmt.Errorf("opening audit log %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err == nil {
		err = checkOurs(fi)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("opening audit log %s: %w", path, err)
	}
	return f, fi.Size(), nil
}

func checkOurs(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return errors.New("not owned by this user")
	}
	return nil
}

// Log queues e for writing, filling Time if zero. When the queue is full
// (the disk is slower than the guest is busy) or the Writer is closed, e
// is dropped and counted; the count is written as a summary entry as soon
// as there is room.
func (w *Writer) Log(e Entry) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return
	}
	select {
	case w.ch <- e:
	default:
		w.dropped.Add(1)
	}
}

// Dropped returns how many entries were dropped so far.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Close writes what is queued, a summary of dropped entries if any, and
// closes the file. It returns the first write error the Writer met.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
	w.mu.Unlock()
	<-w.done
	return w.err
}

func (w *Writer) run(f *os.File, size int64) {
	defer close(w.done)
	defer w.dir.Close()
	bw := bufio.NewWriterSize(f, 64<<10)
	var reported int64 // dropped count already written in summaries
	fail := func(err error) {
		if w.err == nil {
			w.err = err
		}
	}
	write := func(e Entry) {
		if f == nil {
			// A rotation failed (disk full, a name taken meanwhile): try
			// again with each entry rather than go quiet for good.
			var err error
			if f, size, err = openLog(w.dir); err != nil {
				f = nil
				return
			}
			bw.Reset(f)
		}
		if e.Sandbox == "" {
			e.Sandbox = w.opts.Sandbox
		}
		e.clip()
		line, err := json.Marshal(e)
		if err != nil {
			fail(err)
			return
		}
		line = append(line, '\n')
		if size > 0 && size+int64(len(line)) > w.opts.MaxSize {
			if err := bw.Flush(); err != nil {
				fail(err)
			}
			f.Close()
			f, size, err = w.rotate()
			if err != nil {
				fail(err)
				f = nil
				return
			}
			bw.Reset(f)
		}
		n, err := bw.Write(line)
		size += int64(n)
		if err != nil {
			fail(err)
		}
	}
	summary := func() {
		if d := w.dropped.Load() - reported; d > 0 {
			reported += d
			write(Entry{Time: time.Now(), Proto: ProtoAudit, Decision: DecisionDropped, Dropped: d,
				Reason: "audit queue full: entries dropped"})
		}
	}
	for e := range w.ch {
		summary()
		write(e)
		if len(w.ch) == 0 && f != nil {
			if err := bw.Flush(); err != nil {
				fail(err)
			}
		}
	}
	summary()
	if f != nil {
		if err := bw.Flush(); err != nil {
			fail(err)
		}
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
}

// rotate renames the current file to File.1, replacing the previous
// one, and opens a new current file.
func (w *Writer) rotate() (*os.File, int64, error) {
	dfd := int(w.dir.Fd())
	if err := unix.Renameat(dfd, File, dfd, File+".1"); err != nil && err != unix.ENOENT {
		return nil, 0, fmt.Errorf("rotating audit log: %w", err)
	}
	return openLog(w.dir)
}
