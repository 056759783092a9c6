package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sbx-dev/sbx/internal/atomicfile"

	"github.com/google/uuid"
)

// LockFileName is the lock file's name inside Dir.
const LockFileName = "state.lock"

// retryInterval is how often Lock tries again while another process holds
// the lock.
const retryInterval = 50 * time.Millisecond

// Lease is the exclusive right to change the state of one configuration
// directory, held from Lock until Close. Two leases on one directory never
// overlap, across processes as well as within one. A Lease is not safe for
// concurrent use.
type Lease struct {
	dir string
	d   *os.Root // dir/.sbx, opened once by Lock
	f   *os.File // the lock file
	// recorded says that the lock file holds this process's id, written
	// by Lock, so Close blanks it.
	recorded bool
}

// Lock takes the exclusive lock on dir/.sbx/state.lock (creating .sbx and
// the lock file if needed), waiting while another process holds it until
// ctx is done. The lock file records the holder's process id so that a
// waiter can name it: when ctx ends first, the error is a *HeldError
// saying which sbx process holds the lock. The operating system releases the lock when its
// holder exits, so a crashed sbx never leaves it behind.
//
// Lock follows no symbolic link below dir (see Load) and never truncates
// or rewrites a file it does not recognise: the process id is written only
// into a lock file that belongs to this user, has no other name (hard
// link), and is empty or holds nothing but a process id, as one
// fixed-width record over the same bytes. Any other lock file still locks;
// its holder just cannot be named.
func Lock(ctx context.Context, dir string) (*Lease, error) {
	d, err := openDir(dir, true)
	if err != nil {
		return nil, fmt.Errorf("locking state: %w", err)
	}
	path := filepath.Join(dir, Dir, LockFileName)
	f, err := createFile(d, LockFileName, 0o644)
	if errors.Is(err, fs.ErrExist) {
		f, err = openFile(d, LockFileName, os.O_RDWR)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("locking state: %w", err)
	}
	for {
		held, err := tryLock(f)
		if err != nil {
			f.Close()
			d.Close()
			return nil, fmt.Errorf("locking state %s: %w", path, err)
		}
		if !held {
			break
		}
		select {
		case <-ctx.Done():
			pid := readHolder(f)
			f.Close()
			d.Close()
			return nil, &HeldError{PID: pid, Path: path, Err: ctx.Err()}
		case <-time.After(retryInterval):
		}
	}
	return &Lease{dir: dir, d: d, f: f, recorded: writeHolder(f, os.Getpid())}, nil
}

// HeldError is Lock's error when ctx ended while another process held
// the lock. It unwraps to ctx's error (context.DeadlineExceeded when a
// timeout ran out); its message leaves that to the caller, which knows
// what the wait was and how to make it longer.
type HeldError struct {
	// PID is the holder's process id, 0 when the lock file does not name
	// it.
	PID int
	// Path is the lock file's path.
	Path string
	// Err is ctx's error.
	Err error
}

func (e *HeldError) Error() string {
	holder := ""
	if e.PID != 0 {
		holder = fmt.Sprintf(" (pid %d)", e.PID)
	}
	return fmt.Sprintf("another sbx process%s holds the state lock %s", holder, e.Path)
}

func (e *HeldError) Unwrap() error { return e.Err }

// holderSize is the size of the lock file's record: a process id padded
// with spaces, and a newline. A fixed size lets a new record overwrite an
// old one in place, with no truncation.
const holderSize = 20

// holderRecord renders pid as the lock file's record; 0 renders a blank
// one.
func holderRecord(pid int) []byte {
	if pid == 0 {
		return append(bytes.Repeat([]byte(" "), holderSize-1), '\n')
	}
	return fmt.Appendf(nil, "%-*d\n", holderSize-1, pid)
}

// writeHolder records pid in the lock file f if f is this user's, has no
// other name (hard link), and is empty or holds only a process id (digits
// and white space, at most holderSize bytes), and reports whether it did.
// Anything else is left as it is.
func writeHolder(f *os.File, pid int) bool {
	if !ownedSingleLink(f) {
		return false
	}
	buf := make([]byte, holderSize+1)
	n, err := f.ReadAt(buf, 0)
	if (err != nil && !errors.Is(err, io.EOF)) || n > holderSize {
		return false
	}
	for _, c := range buf[:n] {
		if !(c >= '0' && c <= '9' || c == ' ' || c == '\n') {
			return false
		}
	}
	_, err = f.WriteAt(holderRecord(pid), 0)
	return err == nil
}

// readHolder returns the process id recorded in the lock file f, or 0.
func readHolder(f *os.File) int {
	buf := make([]byte, holderSize+1)
	n, err := f.ReadAt(buf, 0)
	if (err != nil && !errors.Is(err, io.EOF)) || n > holderSize {
		return 0
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Close releases the lock, blanking the process id Lock recorded. Closing
// a closed lease does nothing.
func (l *Lease) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	if l.recorded {
		f.WriteAt(holderRecord(0), 0)
	}
	uerr := unlock(f)
	cerr := f.Close()
	l.d.Close()
	if uerr != nil {
		return fmt.Errorf("releasing the state lock: %w", uerr)
	}
	return cerr
}

// Load reads the state under the lease; see Load.
func (l *Lease) Load() (*State, error) {
	if l == nil || l.f == nil {
		return nil, errors.New("loading state: the state lock has been released")
	}
	s, _, err := load(l.d, l.dir)
	return s, err
}

// Save writes s as the next version of the state: it assigns a lineage (a
// random UUID) if s has none, increments the serial and replaces the file
// atomically (temporary file, fsync, rename; mode 0600). Before that, the
// state on disk, if any, is copied to BackupFileName the same way, so the
// backup always holds the state as it was before the last save. On
// success s is updated to what was written (FormatVersion, Lineage,
// Serial); on failure s and the state file are unchanged.
//
// Save refuses to write when the file on disk belongs to another lineage
// (s was read from another configuration's state, or from before the
// state was created), has a newer serial than s (another run saved
// since s was read) or is not a valid state (a *CorruptError): the caller
// must read the state again and redo its work.
//
// Neither file is written through a symbolic link: each is replaced by a
// rename in .sbx, which replaces a link rather than following it.
func (l *Lease) Save(s *State) error {
	if l == nil || l.f == nil {
		return errors.New("saving state: the state lock has been released")
	}
	if s == nil {
		return errors.New("saving state: no state")
	}
	path := Path(l.dir)
	disk, prev, err := load(l.d, l.dir)
	if err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	if disk.Lineage != "" {
		if s.Lineage != disk.Lineage {
			lineage := s.Lineage
			if lineage == "" {
				lineage = "none (a new state)"
			}
			return fmt.Errorf("refusing to save state: %s has lineage %s but the state being saved has lineage %s; it belongs to another configuration or was read before this state was created", path, disk.Lineage, lineage)
		}
		if disk.Serial > s.Serial {
			return fmt.Errorf("refusing to save stale state: %s has serial %d, newer than the serial %d the state being saved was read at; another sbx run saved state since, so read it again", path, disk.Serial, s.Serial)
		}
	}
	next := *s
	next.FormatVersion = FormatVersion
	if next.Lineage == "" {
		id, err := uuid.NewRandom()
		if err != nil {
			return fmt.Errorf("saving state: new lineage: %w", err)
		}
		next.Lineage = id.String()
	}
	next.Serial++
	data, err := Marshal(&next)
	if err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	if prev != nil {
		if err := writeFile(l.d, BackupFileName, prev); err != nil {
			return fmt.Errorf("saving state: keeping a backup of the state before: %w", err)
		}
	}
	if err := writeFile(l.d, FileName, data); err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	s.FormatVersion, s.Lineage, s.Serial = next.FormatVersion, next.Lineage, next.Serial
	return nil
}

// writeFile replaces the file name in the state directory d with data,
// atomically and with mode 0600 (atomicfile.WriteIn).
func writeFile(d *os.Root, name string, data []byte) error {
	return atomicfile.WriteIn(d, name, 0o600, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}
