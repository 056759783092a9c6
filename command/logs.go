package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/state"
	"github.com/sbx-dev/sbx/supervisor"
)

const logsUsage = `
Usage: sbx logs [options] [DIR] SANDBOX

  Print the logs of SANDBOX of the configuration in DIR (default: the
  current directory): its VM's serial console (the kernel's and the guest
  agent's messages) and its supervisor's log, each under a header. The
  console of a VM that ended is kept until "sbx destroy".

Options:

  -console     Only the console, without a header.
  -supervisor  Only the supervisor's log, without a header.
  -f           Keep printing what is added (one log only: give -console
               or -supervisor) until interrupted or the sandbox stops.
`

func runLogs(ctx context.Context, env *Env, args []string) int {
	var console, super, follow bool
	flags := newFlagSet("logs")
	flags.BoolVar(&console, "console", false, "")
	flags.BoolVar(&super, "supervisor", false, "")
	flags.BoolVar(&follow, "f", false, "")
	pos, code, ok := parseArgs(env, flags, logsUsage, args)
	if !ok {
		return code
	}
	dir, names := splitDirNames(pos)
	if len(names) != 1 {
		fmt.Fprintf(env.Stderr, "sbx logs: expected [DIR] SANDBOX, got %q\n", strings.Join(pos, " "))
		return ExitError
	}
	if console && super {
		fmt.Fprintln(env.Stderr, "sbx logs: give -console or -supervisor, not both (neither prints both)")
		return ExitError
	}
	if follow && !console && !super {
		fmt.Fprintln(env.Stderr, "sbx logs: -f follows one log: add -console or -supervisor")
		return ExitError
	}
	name := strings.TrimPrefix(names[0], "sandbox.")
	sdir, err := runtimeDir(env, dir, name)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sbx logs: %v\n", err)
		return ExitError
	}
	if _, err := os.Stat(sdir); err != nil {
		fmt.Fprintf(env.Stderr, "sbx logs: sandbox.%s of %s has no logs: it was never started or was destroyed\n", name, dir)
		return ExitError
	}
	consolePath, _ := supervisor.ConsolePath(sdir)
	logPath := filepath.Join(sdir, supervisor.LogFile)

	if follow {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		path := logPath
		if console {
			path = consolePath
		}
		if err := followFile(ctx, env.Stdout, path, sdir); err != nil {
			fmt.Fprintf(env.Stderr, "sbx logs: %v\n", err)
			return ExitError
		}
		return ExitOK
	}
	type part struct{ title, path string }
	var parts []part
	if !super {
		parts = append(parts, part{"console", consolePath})
	}
	if !console {
		parts = append(parts, part{"supervisor", logPath})
	}
	for i, p := range parts {
		if len(parts) > 1 {
			if i > 0 {
				fmt.Fprintln(env.Stdout)
			}
			fmt.Fprintf(env.Stdout, "==> %s: %s <==\n", p.title, p.path)
		}
		f, err := os.Open(p.path)
		if errors.Is(err, os.ErrNotExist) {
			if len(parts) == 1 {
				fmt.Fprintf(env.Stderr, "sbx logs: no %s log at %s\n", p.title, p.path)
				return ExitError
			}
			fmt.Fprintln(env.Stdout, "(none)")
			continue
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "sbx logs: %v\n", err)
			return ExitError
		}
		_, err = io.Copy(env.Stdout, f)
		f.Close()
		if err != nil {
			fmt.Fprintf(env.Stderr, "sbx logs: %v\n", err)
			return ExitError
		}
	}
	return ExitOK
}

// runtimeDir returns the supervisor directory of sandbox name of the
// configuration in dir: the one state records, else where apply would
// put it.
func runtimeDir(env *Env, dir, name string) (string, error) {
	if st, err := state.Load(dir); err == nil {
		if r := st.Lookup(addrs.SandboxRef(name)); r != nil && r.Sandbox != nil && r.Sandbox.Runtime != nil {
			return r.Sandbox.Runtime.Dir, nil
		}
	}
	return supervisor.SandboxDir(supervisor.RuntimeBase(env.Environ), dir, name)
}

// followFile copies path to w as it grows, until ctx ends or no
// supervisor runs in sdir any more (then what is left is copied).
func followFile(ctx context.Context, w io.Writer, path, sdir string) error {
	var f *os.File
	for n := 0; f == nil; n++ {
		var err error
		f, err = os.Open(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if f == nil {
			if n%10 == 0 && !supervisor.Inspect(ctx, sdir, 0, 0).Running {
				return fmt.Errorf("no log at %s, and the sandbox does not run", path)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	defer f.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if n%10 == 0 && !supervisor.Inspect(ctx, sdir, 0, 0).Running {
			_, err := io.Copy(w, f)
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
