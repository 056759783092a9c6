package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// LeaseFile, in a supervisor directory, names a host process the sandbox
// lives for: while the file is there, the supervisor stops the sandbox
// within LeasePoll of that process exiting (a Claude Code session's
// sandbox, reaped when Claude dies however it dies). A directory
// without one has no such bound.
const LeaseFile = "lease.json"

// LeaseLockFile is the file its writers lock (flock) while they decide
// whether to start the sandbox, so that two of them start one.
const LeaseLockFile = "lease.lock"

// LeasePoll is how often a supervisor checks its lease's process.
const LeasePoll = 2 * time.Second

// Lease is what LeaseFile holds: a process id and its start time (clock
// ticks after boot, /proc/PID/stat's field 22), which together name one
// process, never a later one that reused the id.
type Lease struct {
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
	// Holder says who holds the lease, for people ("claude session
	// ID"); the supervisor does not read it.
	Holder string `json:"holder,omitempty"`
}

// ReadLease reads dir's lease; a directory without one is an error
// wrapping os.ErrNotExist.
func ReadLease(dir string) (Lease, error) {
	var l Lease
	b, err := os.ReadFile(filepath.Join(dir, LeaseFile))
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("supervisor: %s: %w", filepath.Join(dir, LeaseFile), err)
	}
	return l, nil
}

// WriteLease records l as dir's lease, replacing any.
func WriteLease(dir string, l Lease) error {
	if l.Pid <= 0 {
		return fmt.Errorf("supervisor: a lease on process %d", l.Pid)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, LeaseFile), append(b, '\n'), 0o600)
}

// leaseEnded reports why dir's lease has ended, or "" while it holds or
// there is none. A lease file that cannot be read as one holds: it is the
// supervisor's own directory, and a broken file must not stop a sandbox.
func leaseEnded(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, LeaseFile))
	if err != nil {
		return ""
	}
	var l Lease
	if json.Unmarshal(b, &l) != nil || l.Pid <= 0 {
		return ""
	}
	if !leaseHolder(l) {
		return fmt.Sprintf("the process it was leased to (%d) has exited", l.Pid)
	}
	return ""
}

// watchLease returns a channel that receives why dir's lease ended,
// checked every LeasePoll until done closes.
func watchLease(dir string, done <-chan struct{}) <-chan string {
	ch := make(chan string, 1)
	go func() {
		t := time.NewTicker(LeasePoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if why := leaseEnded(dir); why != "" {
					ch <- why
					return
				}
			}
		}
	}()
	return ch
}
