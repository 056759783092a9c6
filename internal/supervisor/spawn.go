package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// Verb is the hidden command-line verb that runs a supervisor: Spawn
// starts "<binary> supervise DIR" by default, and the command line's
// supervise verb calls RunDir.
const Verb = "supervise"

// DefaultReadyTimeout bounds Spawn's wait for the sandbox when
// SpawnOptions.ReadyTimeout is zero; the boot itself is bounded by
// Spec.BootTimeout.
const DefaultReadyTimeout = 5 * time.Minute

// SpawnOptions configure Spawn.
type SpawnOptions struct {
	// Command is the program, and its first arguments, that runs the
	// supervisor; the directory is added as the last argument. Nil means
	// this executable with the Verb: {os.Executable(), "supervise"}.
	Command []string
	// Env is the supervisor's environment; nil means this process's.
	Env []string
	// ReadyTimeout bounds the wait for the sandbox to run; zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Secrets holds the value of each secret the spec's policy binds, by
	// name. They reach the supervisor through a pipe it inherits, never
	// through a file or its command line.
	Secrets map[string][]byte
	// Snapshots is the directory of machines saved for warm starts
	// (Options.Snapshots), handed to the supervisor as SnapshotsFlag;
	// empty boots the machine cold.
	Snapshots string
}

// SnapshotsFlag is the supervisor command line's flag that names
// Options.Snapshots: "<binary> supervise -snapshots=DIR SUPERVISOR-DIR".
const SnapshotsFlag = "-snapshots"

// maxLog is the size past which Spawn starts a new supervisor log.
const maxLog = 1 << 20

// Spawn starts a supervisor for spec in dir as a detached process (its own
// session, its output in dir/supervisor.log) that outlives this one, and
// returns its status once the sandbox runs. dir and the directories it
// makes above it are private (mode 0700) and must be safe from other
// users (see SandboxDir); its files are never opened through a symbolic
// link. When the supervisor fails
// first, the error quotes its status or the end of its log. When ctx ends
// first, the supervisor is told to stop, and Spawn returns once it has.
func Spawn(ctx context.Context, dir string, spec Spec, opts SpawnOptions) (*Status, error) {
	if err := secureDir(dir, 1, true); err != nil {
		return nil, err
	}
	if running(dir) {
		return nil, fmt.Errorf("supervisor: %s is already served by a running supervisor", dir)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, SpecFile), append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, StatusFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	argv := opts.Command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("supervisor: finding this executable: %w", err)
		}
		argv = []string{exe, Verb}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	logPath := filepath.Join(dir, LogFile)
	// Each start appends to the log; a log grown past maxLog is kept as
	// LogFile.1 (replacing the one before) and a new one begun.
	if fi, err := os.Lstat(logPath); err == nil && fi.Size() > maxLog {
		os.Rename(logPath, logPath+".1")
	}
	logf, err := openPrivate(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	args := argv[1:len(argv):len(argv)]
	if opts.Snapshots != "" {
		args = append(args, SnapshotsFlag+"="+opts.Snapshots)
	}
	cmd := exec.Command(argv[0], append(args, abs)...)
	cmd.Dir = abs
	cmd.Env = opts.Env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	secretsR, secretsW, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	cmd.ExtraFiles = []*os.File{secretsR} // descriptor 3
	cmd.Env = append(slices.Clone(cmd.Env), secretsFDEnv+"=3")
	err = cmd.Start()
	logf.Close()
	secretsR.Close()
	if err != nil {
		secretsW.Close()
		return nil, fmt.Errorf("supervisor: starting %s: %w", argv[0], err)
	}
	// The pipe holds far more than a policy's secrets: the write does not
	// wait for the supervisor to read.
	go func() {
		b, _ := json.Marshal(opts.Secrets)
		secretsW.Write(b)
		secretsW.Close()
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timeout := opts.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := ReadStatus(dir); err == nil && st.Pid == cmd.Process.Pid {
			switch st.State {
			case StateRunning:
				return st, nil
			case StateFailed, StateStopped:
				return nil, fmt.Errorf("supervisor: sandbox %s did not start: %s", spec.Name, st.Error)
			}
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("supervisor: sandbox %s: the supervisor exited (%v) before the sandbox ran; %s says:\n%s",
				spec.Name, err, logPath, logTail(logPath, logStart))
		case <-ctx.Done():
			abandon(cmd.Process, exited)
			return nil, fmt.Errorf("supervisor: sandbox %s: %w", spec.Name, ctx.Err())
		case <-deadline.C:
			abandon(cmd.Process, exited)
			return nil, fmt.Errorf("supervisor: sandbox %s did not run within %v; see %s", spec.Name, timeout, logPath)
		case <-tick.C:
		}
	}
}

// abandonWait bounds how long an abandoned supervisor may take to stop
// its machine before it is killed.
const abandonWait = 30 * time.Second

// abandon tells a supervisor that is still starting to stop, and waits
// until it has (it stops its machine first), killing it if it takes too
// long, so that nothing of the sandbox outlives the abandoned start.
func abandon(p *os.Process, exited <-chan error) {
	p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(abandonWait):
		p.Kill()
		<-exited
	}
}

// logTail returns the end of what the log got from offset on.
func logTail(path string, from int64) string {
	b, err := readPrivate(path)
	if err != nil || int64(len(b)) < from {
		return "(no log)"
	}
	b = b[from:]
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "(empty)"
	}
	return string(b)
}

// ReadSpec reads the spec Spawn wrote in dir; a spec.json that is a
// symbolic link, or not this user's, is an *UnsafeError.
func ReadSpec(dir string) (*Spec, error) {
	path := filepath.Join(dir, SpecFile)
	b, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	var spec Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("supervisor: %s: %w", path, err)
	}
	if spec.Image == nil {
		return nil, fmt.Errorf("supervisor: %s: no image", path)
	}
	return &spec, nil
}

// RunDir runs the supervisor of the spec Spawn wrote in dir (see Run);
// it is what the supervise verb does.
func RunDir(ctx context.Context, dir string, opts Options) error {
	spec, err := ReadSpec(dir)
	if err != nil {
		return err
	}
	secrets, err := readSecrets()
	if err != nil {
		return err
	}
	opts.Dir, opts.Spec, opts.Secrets = dir, *spec, secrets
	return Run(ctx, opts)
}
