package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sbx-dev/sbx/atomicfile"

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
	f   *os.File
}

// Lock takes the exclusive lock on dir/.sbx/state.lock (creating .sbx if
// needed), waiting while another process holds it until ctx is done. The
// lock file records the holder's process id so that a waiter can name it:
// when ctx ends first, the error says which sbx process holds the lock.
// The operating system releases the lock when its holder exits, so a
// crashed sbx never leaves it behind.
func Lock(ctx context.Context, dir string) (*Lease, error) {
	sdir := filepath.Join(dir, Dir)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return nil, fmt.Errorf("locking state: %w", err)
	}
	path := filepath.Join(sdir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking state: %w", err)
	}
	for {
		held, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking state %s: %w", path, err)
		}
		if !held {
			break
		}
		select {
		case <-ctx.Done():
			holder := ""
			if pid := readHolder(path); pid != 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
			f.Close()
			return nil, fmt.Errorf("another sbx process%s holds the state lock %s; wait for it to finish and try again: %w", holder, path, ctx.Err())
		case <-time.After(retryInterval):
		}
	}
	// Record the holder for anyone who waits.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lease{dir: dir, f: f}, nil
}

// readHolder returns the process id recorded in the lock file, or 0.
func readHolder(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Close releases the lock. Closing a closed lease does nothing.
func (l *Lease) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	f.Truncate(0)
	uerr := unlock(f)
	cerr := f.Close()
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
	return Load(l.dir)
}

// Save writes s as the next version of the state: it assigns a lineage (a
// random UUID) if s has none, increments the serial and replaces the file
// atomically (temporary file, fsync, rename; mode 0600). On success s is
// updated to what was written (FormatVersion, Lineage, Serial); on failure
// s and the file are unchanged.
//
// Save refuses to write when the file on disk belongs to another lineage
// (s was read from another configuration's state, or from before the
// state was created) or has a newer serial than s (another run saved
// since s was read): the caller must read the state again and redo its
// work.
func (l *Lease) Save(s *State) error {
	if l == nil || l.f == nil {
		return errors.New("saving state: the state lock has been released")
	}
	if s == nil {
		return errors.New("saving state: no state")
	}
	path := Path(l.dir)
	disk, err := Load(l.dir)
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
	if err := atomicfile.WriteBytes(path, data, 0o600); err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	s.FormatVersion, s.Lineage, s.Serial = next.FormatVersion, next.Lineage, next.Serial
	return nil
}
