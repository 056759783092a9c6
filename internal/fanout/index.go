package fanout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Names in a results directory.
const (
	// IndexFile holds one JSON line (a Run) per finished run, in the
	// order they finished.
	IndexFile = "index.jsonl"
	// EvalFile describes the eval (an Eval), written before the first
	// run starts.
	EvalFile = "eval.json"
	// RunsDir holds one directory per finished run, named by its index.
	RunsDir = "runs"
	// WorkDir holds the workspace copies while the eval runs; it is
	// private (0700) and removed at the end.
	WorkDir = ".work"
)

// Names in a run's directory.
const (
	StdoutFile  = "stdout"
	StderrFile  = "stderr"
	ChangesTar  = "changes.tar"
	ChangesDiff = "changes.diff"
)

// Statuses of a Run.
const (
	// StatusExited: the command ran and ended, by itself or by a
	// signal (ExitCode and Signal say how).
	StatusExited = "exited"
	// StatusTimeout: the command ran longer than the timeout and was
	// killed.
	StatusTimeout = "timeout"
	// StatusError: the run could not run the command: the sandbox did
	// not start, the guest has no such command, the workspace could not
	// be copied (Error says why).
	StatusError = "error"
)

// Run is what one finished run did: one line of the index.
type Run struct {
	// Run is the run's index, 0 to N-1, also its SBX_RUN.
	Run    int    `json:"run"`
	Status string `json:"status"`
	// ExitCode is the command's exit code: 128 plus the signal's number
	// when a signal killed it, 126 or 127 when the guest could not
	// execute or find it, -1 when it did not run.
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
	// Started is when the run began (its workspace copy); the durations
	// are its whole run, the sandbox's start and the command's run.
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	BootMS     int64     `json:"boot_ms"`
	CommandMS  int64     `json:"command_ms"`
	// Stdout and Stderr are the files holding the command's output,
	// relative to the results directory, with their sizes; a stream cut
	// at Options.MaxOutput says so.
	Stdout          string `json:"stdout"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	Stderr          string `json:"stderr"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// Changes are the paths the run changed in its read-write workspace
	// mounts, sorted; ChangesTar and ChangesDiff the files holding them
	// (relative to the results directory), set when there are changes.
	Changes     []Change `json:"changes"`
	ChangesTar  string   `json:"changes_tar,omitempty"`
	ChangesDiff string   `json:"changes_diff,omitempty"`
	// Audit is the sandbox's egress audit log, when it wrote one.
	Audit string `json:"audit,omitempty"`
}

// Eval is what EvalFile records of the eval.
type Eval struct {
	Sandbox  string    `json:"sandbox"`
	Runs     int       `json:"runs"`
	Parallel int       `json:"parallel"`
	Command  []string  `json:"command"`
	Started  time.Time `json:"started"`
	// Mounts are the read-write mounts each run got a copy of: guest
	// path, the host directory copied and how (CopyStats of the
	// snapshot).
	Mounts []EvalMount `json:"mounts"`
}

// EvalMount is one read-write mount of an Eval.
type EvalMount struct {
	Guest   string    `json:"guest"`
	HostDir string    `json:"host_dir"`
	Copy    CopyStats `json:"copy"`
}

// CheckResultsDir reports whether dir can be an eval's results
// directory: it does not exist, or is an empty directory (not a link to
// one). exists says which.
func CheckResultsDir(dir string) (exists bool, err error) {
	info, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !info.IsDir():
		return true, fmt.Errorf("results directory %s exists and is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return true, err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != io.EOF {
		if err == nil {
			return true, fmt.Errorf("results directory %s is not empty; name a new one, or empty it", dir)
		}
		return true, err
	}
	return true, nil
}

// MakeResultsDir creates the results directory dir, private (0700), and
// its parents. A directory that exists must be empty: an eval never
// mixes its results with another's.
func MakeResultsDir(dir string) error {
	exists, err := CheckResultsDir(dir)
	if err != nil {
		return err
	}
	if exists {
		return os.Chmod(dir, 0o700)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

// Index appends runs to a results directory's index.
type Index struct {
	mu sync.Mutex
	f  *os.File
}

// CreateIndex creates the index of the results directory dir.
func CreateIndex(dir string) (*Index, error) {
	f, err := os.OpenFile(filepath.Join(dir, IndexFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Index{f: f}, nil
}

// Append writes r as one line and syncs it to disk before returning, so
// that a crash or an interrupt later loses no finished run.
func (x *Index) Append(r Run) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, err := x.f.Write(append(line, '\n')); err != nil {
		return err
	}
	return x.f.Sync()
}

// Close closes the index.
func (x *Index) Close() error { return x.f.Close() }

// ReadIndex reads the runs of a results directory's index, in the order
// they finished.
func ReadIndex(dir string) ([]Run, error) {
	f, err := os.Open(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Run
	dec := json.NewDecoder(f)
	for {
		var r Run
		if err := dec.Decode(&r); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("%s: line %d: %w", IndexFile, len(out)+1, err)
		}
		out = append(out, r)
	}
}

// writeJSON writes v to the file p, synced.
func writeJSON(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
