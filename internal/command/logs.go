package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/machine/consolelog"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/internal/termtext"
)

const logsUsage = `
Usage: sbx logs [options] [DIR] SANDBOX

  Print the logs of SANDBOX of the configuration in DIR (default: the
  current directory): its VM's serial console (the kernel's and the guest
  agent's messages) and its supervisor's log, each under a header. The
  console of a VM that ended is kept until "sbx destroy". Only the
  console's latest 8 to 16 MiB are kept (console.log, and console.log.1
  before it), and printed.

Options:

  -console            Only the console, without a header.
  -supervisor         Only the supervisor's log, without a header.
  -f                  Keep printing what is added (one log only: give -console
                      or -supervisor) until interrupted or the sandbox stops.
  -raw                Print control characters as they are, also on a terminal.
  -egress             The egress audit log instead: one line per connection
                      or HTTP request the sandbox made or was refused (time,
                      decision, destination, method and path, status, reason,
                      the spec rule and its file:line, secrets substituted by
                      name, bytes each way). With -f, follows it.
  -json               With -egress: the entries as JSON, one per line.

  The console holds what the guest writes. On a terminal, its control
  characters (escape sequences, carriage returns, bidirectional
  overrides) are printed escaped, as \x1b and the like, so the guest
  cannot drive the terminal; tabs and line breaks are kept. Written to a
  file or a pipe, or with -raw, the logs are printed byte for byte.
`

func runLogs(ctx context.Context, env *Env, args []string) int {
	var console, super, follow, raw, egressLog, asJSON bool
	flags := newFlagSet("logs")
	flags.BoolVar(&egressLog, "egress", false, "")
	flags.BoolVar(&asJSON, "json", false, "")
	flags.BoolVar(&console, "console", false, "")
	flags.BoolVar(&super, "supervisor", false, "")
	flags.BoolVar(&follow, "f", false, "")
	flags.BoolVar(&raw, "raw", false, "")
	pos, code, ok := parseArgs(env, flags, logsUsage, args)
	if !ok {
		return code
	}
	if _, tty := terminalFD(env.Stdout); tty && !raw {
		escaped := termtext.NewWriter(env.Stdout)
		defer escaped.Flush()
		e := *env
		e.Stdout = escaped
		env = &e
	}
	dir, names := splitDirNames(pos)
	if len(names) != 1 {
		usageError(env, "logs", "Invalid arguments", fmt.Sprintf("sbx logs takes [DIR] SANDBOX; got %q.", strings.Join(pos, " ")))
		return ExitError
	}
	if console && super {
		usageError(env, "logs", "Conflicting options", "Give -console or -supervisor, not both (neither prints both).")
		return ExitError
	}
	if egressLog && (console || super) {
		usageError(env, "logs", "Conflicting options", "-egress prints the egress audit log alone: leave out -console and -supervisor.")
		return ExitError
	}
	if asJSON && !egressLog {
		usageError(env, "logs", "Invalid -json", "-json goes with -egress (the other logs are text).")
		return ExitError
	}
	if follow && !console && !super && !egressLog {
		usageError(env, "logs", "Invalid -f", "-f follows one log: add -console or -supervisor.")
		return ExitError
	}
	name := strings.TrimPrefix(names[0], "sandbox.")
	sdir, err := runtimeDir(env, dir, name)
	if err != nil {
		errorFrom(env, fmt.Sprintf("Cannot find sandbox.%s", name), err, true)
		return ExitError
	}
	if _, err := os.Stat(sdir); err != nil {
		errorDetail(env, fmt.Sprintf("sandbox.%s has no logs", name), fmt.Sprintf("sandbox.%s of %s has no logs: it was never started or was destroyed.", name, quoteText(dir)))
		return ExitError
	}
	if egressLog {
		return printEgress(ctx, env, sdir, follow, asJSON)
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
		running := func() bool { return supervisor.Inspect(ctx, sdir, 0, 0).Alive() }
		if err := operation.FollowFile(ctx, env.Stdout, path, running, followPoll); err != nil {
			errorFrom(env, "Cannot follow the log", err, true)
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
		err := printLog(env.Stdout, env.Stderr, p.path, p.title == "console")
		if errors.Is(err, os.ErrNotExist) {
			if len(parts) == 1 {
				errorDetail(env, fmt.Sprintf("No %s log", p.title), fmt.Sprintf("There is no %s log at %s.", p.title, quoteText(p.path)))
				return ExitError
			}
			fmt.Fprintln(env.Stdout, "(none)")
			continue
		}
		if err != nil {
			errorFrom(env, fmt.Sprintf("Cannot read the %s log", p.title), err, true)
			return ExitError
		}
	}
	return ExitOK
}

// egressTail is how many audit entries "logs -egress" prints before it
// follows or ends: the log itself is bounded (audit.Open rotates it).
const egressTail = 1 << 20

// printEgress prints the egress audit log of the sandbox in sdir, and with
// follow what is added until interrupted or the sandbox stops.
func printEgress(ctx context.Context, env *Env, sdir string, follow, asJSON bool) int {
	print := func(e audit.Entry) error {
		if asJSON {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintln(env.Stdout, audit.Format(e))
		return err
	}
	if !follow {
		var st audit.Stats
		entries, err := audit.TailStats(sdir, egressTail, &st)
		if err != nil {
			errorFrom(env, "Cannot read the egress log", err, true)
			return ExitError
		}
		for _, e := range entries {
			if err := print(e); err != nil {
				errorFrom(env, "Cannot print the egress log", err, true)
				return ExitError
			}
		}
		if st.Malformed > 0 {
			warning(env, "Malformed egress log lines", fmt.Sprintf("Skipped %d malformed lines of %s.", st.Malformed, quoteText(filepath.Join(sdir, audit.File))))
		}
		return ExitOK
	}
	// Like tail -f: the last few entries, then what is added.
	recent, err := audit.Tail(sdir, 10)
	if err != nil {
		errorFrom(env, "Cannot read the egress log", err, true)
		return ExitError
	}
	for _, e := range recent {
		if err := print(e); err != nil {
			errorFrom(env, "Cannot print the egress log", err, true)
			return ExitError
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if !supervisor.Inspect(ctx, sdir, 0, 0).Alive() {
				// What the supervisor wrote last is read before Follow ends.
				time.Sleep(2 * followPoll)
				cancel()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * followPoll):
			}
		}
	}()
	err = audit.Follow(ctx, sdir, print)
	if err != nil && !errors.Is(err, context.Canceled) {
		errorFrom(env, "Cannot follow the egress log", err, true)
		return ExitError
	}
	return ExitOK
}

// printLog copies the log at path to w. A console log is printed by its
// end: its rotated predecessor first when there is one, and of each file
// at most its last consolelog.DefaultMax bytes (more is there only when
// left by an older sbx), saying on stderr what was left out.
func printLog(w, stderr io.Writer, path string, console bool) error {
	if !console {
		f, _, err := consolelog.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	for _, p := range []string{consolelog.Rotated(path), path} {
		skipped, err := consolelog.CopyTail(w, p, consolelog.DefaultMax)
		if errors.Is(err, os.ErrNotExist) && p != path {
			continue
		}
		if err != nil {
			return err
		}
		if skipped > 0 {
			_ = diags.Render(stderr, diags.Diagnostics{diags.Sourceless(diags.Warning, "Console log shortened",
				fmt.Sprintf("sbx prints the end of a console log: it left out the first %d bytes of %s.", skipped, quoteText(p)))}, diags.RenderOptions{})
		}
	}
	return nil
}

// runtimeDir returns the supervisor directory of sandbox name of the
// configuration in dir: where apply puts it, never a directory the state
// file records (an untrusted checkout writes that file).
func runtimeDir(env *Env, dir, name string) (string, error) {
	return supervisor.SandboxDir(supervisor.RuntimeBase(env.Environ), dir, name)
}

// followPoll is how often "logs -f" looks for more.
const followPoll = 200 * time.Millisecond
