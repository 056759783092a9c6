package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/guestconn"
	"golang.org/x/term"
)

// guestCommand is what sbx run and sbx exec share: running one command in
// a guest with the CLI's streams, terminal and timeout, and turning the
// outcome into sbx's exit code.
type guestCommand struct {
	verb    string // "run" or "exec", for messages
	target  string // the sandbox's address, for messages
	stdin   bool   // -i
	tty     bool   // -t
	timeout time.Duration
}

// run completes cmd (Args, Env, Dir and User set by the caller) with the
// CLI's streams and terminal, runs it with exec and returns sbx's exit
// code: the command's, 128+signal, ExitTimeout, 130 when interrupted or
// ExitError. With -t the guest's terminal starts with the size of the
// local one (stdout's, else stdin's) and, on unix, follows its resizes.
func (g guestCommand) run(ctx context.Context, env *Env, cmd guestconn.Cmd,
	exec func(context.Context, guestconn.Cmd) (*guestconn.ExitStatus, error)) int {
	cmd.Stdout, cmd.Stderr = env.Stdout, env.Stderr
	if g.stdin {
		cmd.Stdin = env.Stdin
	}
	var restore func()
	if g.tty {
		cmd.PTY = &guestconn.PTY{Rows: 24, Cols: 80}
		if t, ok := env.getenv("TERM"); ok && t != "" {
			cmd.PTY.Term = t
		}
		if fd, ok := sizeFD(env); ok {
			// Watch before reading the size, so that a resize in
			// between is not lost.
			stop := forwardResizes(fd, &cmd)
			defer stop()
			if rows, cols, ok := terminalSize(fd); ok {
				cmd.PTY.Rows, cmd.PTY.Cols = rows, cols
			}
		}
		if g.stdin {
			if f, ok := env.Stdin.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
				if old, err := term.MakeRaw(int(f.Fd())); err == nil {
					restore = func() { term.Restore(int(f.Fd()), old) }
				}
			}
		}
	}
	if restore != nil {
		defer restore()
	}

	runCtx := ctx
	if g.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	st, err := exec(runCtx, cmd)
	if restore != nil {
		restore()
		restore = nil
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		fmt.Fprintf(env.Stderr, "sbx %s: interrupted; the command was killed\n", g.verb)
		return 128 + int(syscall.SIGINT)
	case errors.Is(err, context.DeadlineExceeded) && g.timeout > 0:
		fmt.Fprintf(env.Stderr, "sbx %s: the command did not finish within %v; it was killed\n", g.verb, g.timeout)
		return ExitTimeout
	default:
		fmt.Fprintf(env.Stderr, "sbx %s: %s: %s\n", g.verb, g.target, quoteErr(err))
		return ExitError
	}
	return exitCode(st)
}

// sizeFD returns the terminal whose size the guest's terminal follows:
// stdout's, else stdin's.
func sizeFD(env *Env) (int, bool) {
	if fd, ok := terminalFD(env.Stdout); ok {
		return fd, true
	}
	if f, ok := env.Stdin.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		return int(f.Fd()), true
	}
	return 0, false
}

// terminalSize returns the size of the terminal fd, if it has one.
func terminalSize(fd int) (rows, cols uint16, ok bool) {
	w, h, err := term.GetSize(fd)
	if err != nil || w <= 0 || h <= 0 || w > math.MaxUint16 || h > math.MaxUint16 {
		return 0, 0, false
	}
	return uint16(h), uint16(w), true
}

// sandboxCommand splits the positional arguments of sbx run and sbx exec,
// [DIR] SANDBOX [--] COMMAND..., reporting a usage error for verb.
func sandboxCommand(env *Env, verb string, pos []string) (dir, sandbox string, command []string, ok bool) {
	var before []string
	if i := slices.Index(pos, "--"); i >= 0 {
		before, command = pos[:i], pos[i+1:]
	} else if len(pos) > 0 {
		before, command = pos[:1], pos[1:]
	}
	switch len(before) {
	case 1:
		dir, sandbox = ".", before[0]
	case 2:
		dir, sandbox = before[0], before[1]
	case 0:
		fmt.Fprintf(env.Stderr, "sbx %s: name the sandbox and the command: sbx %s [DIR] SANDBOX -- COMMAND [ARG...]\n", verb, verb)
		return "", "", nil, false
	default:
		fmt.Fprintf(env.Stderr, "sbx %s: expected [DIR] SANDBOX before --, got %s\n", verb, strings.Join(before, " "))
		return "", "", nil, false
	}
	if len(command) == 0 {
		fmt.Fprintf(env.Stderr, "sbx %s: no command to run in %s; write it after --\n", verb, sandbox)
		return "", "", nil, false
	}
	return dir, sandbox, command, true
}

// guestArgs are what "sbx run" and "sbx exec" share: [DIR] SANDBOX --
// COMMAND and the options of the command run in the guest.
type guestArgs struct {
	dir     string
	sandbox string
	command []string
	user    string
	env     stringList
	workdir string
	stdin   bool
	tty     bool
	timeout time.Duration
}

// register adds -u, -e, -w, -i, -t and -timeout to flags.
func (a *guestArgs) register(flags *flag.FlagSet) {
	flags.StringVar(&a.user, "u", "", "")
	flags.Var(&a.env, "e", "")
	flags.StringVar(&a.workdir, "w", "", "")
	flags.BoolVar(&a.stdin, "i", false, "")
	flags.BoolVar(&a.tty, "t", false, "")
	flags.DurationVar(&a.timeout, "timeout", 0, "")
}

// parse parses args for verb: flags come before the sandbox, and
// everything after it is the command's, its own flags included. On -h it
// prints usage. ok is false when sbx should exit with code.
func (a *guestArgs) parse(env *Env, verb, usage string, flags *flag.FlagSet, args []string) (code int, ok bool) {
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(env.Stdout, strings.TrimLeft(usage, "\n"))
			return ExitOK, false
		}
		fmt.Fprintf(env.Stderr, "sbx %s: %v\nRun \"sbx %s -h\" for its options.\n", verb, err, verb)
		return ExitError, false
	}
	if a.dir, a.sandbox, a.command, ok = sandboxCommand(env, verb, flags.Args()); !ok {
		return ExitError, false
	}
	for _, kv := range a.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			fmt.Fprintf(env.Stderr, "sbx %s: -e %q: write KEY=VALUE\n", verb, kv)
			return ExitError, false
		}
	}
	return ExitOK, true
}
