package vmbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// Preflight checks that benchmark name runs from the root of the sbx
// repository and that QEMU is installed, and returns QEMU's path.
func Preflight(name string) (string, error) {
	mod, err := os.ReadFile("go.mod")
	if err != nil || !strings.HasPrefix(string(mod), "module github.com/sbx-dev/sbx\n") {
		return "", fmt.Errorf("run %s from the root of the sbx repository (go run ./bench/%s)", name, name)
	}
	return machinetest.QEMU()
}

// WorkDir returns the absolute path of work, made if missing, or of a new
// temporary directory named for the benchmark when work is "". remove
// removes a temporary directory and does nothing for one the user named.
func WorkDir(name, work string) (dir string, remove func(), err error) {
	remove = func() {}
	if work == "" {
		if work, err = os.MkdirTemp("", name+"-"); err != nil {
			return "", remove, err
		}
		tmp := work
		remove = func() { os.RemoveAll(tmp) }
	}
	if dir, err = filepath.Abs(work); err != nil {
		return "", remove, err
	}
	return dir, remove, os.MkdirAll(dir, 0o755)
}

// NewFixture makes the test sandbox's fixture in dir (see
// machinetest.New).
func NewFixture(ctx context.Context, dir string) (*machinetest.Fixture, error) {
	// The packages of a work directory kept from an earlier run may be
	// hard links to the shared package cache, which New would write
	// through: remove the links first, so that New links afresh.
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		if err := os.Remove(filepath.Join(dir, "config", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return machinetest.New(ctx, dir)
}

// Setup prepares a benchmark's fixture: it checks that the benchmark
// log.Name can run (Preflight), makes its work directory (WorkDir), logs
// making, a format whose one verb is the directory's path, and makes the
// fixture there (NewFixture). remove is WorkDir's, and never nil.
func Setup(ctx context.Context, log Log, work, making string) (fix *machinetest.Fixture, remove func(), err error) {
	if _, err := Preflight(log.Name); err != nil {
		return nil, func() {}, err
	}
	work, remove, err = WorkDir(log.Name, work)
	if err != nil {
		return nil, remove, err
	}
	log.Printf(making, work)
	fix, err = NewFixture(ctx, work)
	return fix, remove, err
}

// Log writes a benchmark's progress as lines "15:04:05 NAME: message".
type Log struct {
	W    io.Writer
	Name string
}

// Printf writes one line.
func (l Log) Printf(format string, args ...any) {
	fmt.Fprintf(l.W, "%s %s: %s\n", time.Now().Format("15:04:05"), l.Name, fmt.Sprintf(format, args...))
}

// Exec runs cmd in m's guest within limit and returns its standard output
// and how long the exec took as the host saw it, from sending it to its
// exit status. A command that fails is an error quoting the end of its
// output.
func Exec(ctx context.Context, m *machine.Machine, limit time.Duration, cmd guestconn.Cmd) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	st, err := m.Exec(ctx, cmd)
	d := time.Since(start)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", cmd.Args, err)
	}
	if !st.Success() {
		return "", 0, fmt.Errorf("%q exited %d %s: %s", cmd.Args, st.Code, st.Signal, strings.TrimSpace(tail(out.String()+errOut.String(), 2000)))
	}
	return out.String(), d, nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Exit writes each error that is not nil to stderr as "NAME: error" and
// returns the exit status: 1 if there was one, else 0. When ctx ended,
// the first error says the run was interrupted.
func Exit(ctx context.Context, name string, stderr io.Writer, errs ...error) int {
	code := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		if i == 0 && ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		code = 1
	}
	return code
}
