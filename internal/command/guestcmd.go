package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
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
// code: the command's, 128+signal, ExitTimeout, 130 when interrupted,
// 127 when the guest found no such command and 126 when it could not
// execute it (as shells exit), or ExitError. With -t the guest's terminal starts with the size of the
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
	var notRun *guestconn.CommandError
	switch {
	case err == nil:
	case errors.As(err, &notRun):
		// Exit as a shell does for a command it cannot run.
		what := "Command not found"
		if notRun.Code == guestconn.ExitNotExecutable {
			what = "Command not executable"
		}
		errorDetail(env, fmt.Sprintf("%s in %s", what, g.target), quoteErr(notRun.Err))
		return notRun.Code
	case ctx.Err() != nil:
		errorDetail(env, "Interrupted", fmt.Sprintf("The command in %s was killed.", g.target))
		return 128 + int(syscall.SIGINT)
	case errors.Is(err, context.DeadlineExceeded) && g.timeout > 0:
		errorDetail(env, "Timed out", fmt.Sprintf("The command in %s did not finish within %v (-timeout); it was killed.", g.target, g.timeout))
		return ExitTimeout
	default:
		errorFrom(env, fmt.Sprintf("Cannot run the command in %s", g.target), err, true)
		return ExitError
	}
	return st.ShellCode()
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
// [DIR] SANDBOX [--] COMMAND..., reporting a usage error for verb. dashes
// reports whether "--" was written. A sandbox that is no sandbox name
// (a path, most often: "sbx exec ./config box ls" without --, or
// "sbx exec ./config -- ls" without the sandbox) is a usage error that
// says how to write the command.
func sandboxCommand(env *Env, verb string, pos []string) (dir, sandbox string, command []string, dashes, ok bool) {
	var before []string
	if i := slices.Index(pos, "--"); i >= 0 {
		before, command, dashes = pos[:i], pos[i+1:], true
	} else if len(pos) > 0 {
		before, command = pos[:1], pos[1:]
	}
	switch len(before) {
	case 1:
		dir, sandbox = ".", before[0]
	case 2:
		dir, sandbox = before[0], before[1]
	case 0:
		usageError(env, verb, "Invalid arguments", fmt.Sprintf("Name the sandbox and the command: sbx %s [DIR] SANDBOX -- COMMAND [ARG...]", verb))
		return "", "", nil, false, false
	default:
		usageError(env, verb, "Invalid arguments", fmt.Sprintf("sbx %s takes [DIR] SANDBOX before --; got %s", verb, quoteText(strings.Join(before, " "))))
		return "", "", nil, false, false
	}
	if !addrs.ValidName(strings.TrimPrefix(sandbox, "sandbox.")) {
		detail := fmt.Sprintf("%q is not a sandbox's name.\n", sandbox)
		switch {
		case !dashes && len(command) > 1 && addrs.ValidName(strings.TrimPrefix(command[0], "sandbox.")):
			// "sbx exec DIR SANDBOX COMMAND...": the -- is missing.
			detail += fmt.Sprintf("Without --, the first argument is the sandbox and the rest the command. To run %s in %s of the configuration in %s, write:\n  sbx %s %s %s -- %s",
				quoteText(command[1]), quoteText(command[0]), quoteText(sandbox), verb, shellQuote(sandbox), shellQuote(command[0]), shellJoin(command[1:]))
		default:
			detail += fmt.Sprintf("Usage: sbx %s [options] [DIR] SANDBOX -- COMMAND [ARG...]", verb)
		}
		usageError(env, verb, "Invalid sandbox name", detail)
		return "", "", nil, false, false
	}
	if len(command) == 0 {
		usageError(env, verb, "Missing command", fmt.Sprintf("No command to run in %s; write it after --.", sandbox))
		return "", "", nil, false, false
	}
	return dir, sandbox, command, dashes, true
}

// notRunning tells why verb found no running sandbox name of the
// configuration in dir: the directory does not exist or is not one, the
// configuration declares no such sandbox (the declared ones are listed,
// as sbx run lists them), or the sandbox is declared but not running.
// The configuration is loaded with the environment's variables only; when
// it does not load, the sandbox is said not to run. pos, when set, are
// the positional arguments of a command written without "--", for a hint
// when the sandbox named is also a directory.
func notRunning(env *Env, verb, dir, name string, pos []string) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		errorDetail(env, "No such directory", fmt.Sprintf("The configuration directory %s does not exist.", quoteText(dir)))
		return
	case err == nil && !fi.IsDir():
		errorDetail(env, "Not a directory", fmt.Sprintf("%s is not a directory; name the configuration's directory.", quoteText(dir)))
		return
	}
	cfg, diags := lang.Load(dir, lang.Options{Environ: env.Environ})
	_, declared := cfg.Sandboxes[name]
	var summary, detail string
	if declared || diags.HasErrors() {
		summary = fmt.Sprintf("sandbox.%s is not running", name)
		detail = fmt.Sprintf("sandbox.%s of %s is not running (\"sbx ps\" says why; \"sbx apply\" starts it).", name, quoteText(dir))
	} else {
		names := slices.Sorted(maps.Keys(cfg.Sandboxes))
		list := "it declares none"
		if len(names) > 0 {
			list = "the sandboxes are: " + strings.Join(names, ", ")
		}
		summary = fmt.Sprintf("No sandbox %q in the configuration", name)
		detail = fmt.Sprintf("The configuration in %s has no sandbox %q; %s.", quoteText(dir), name, list)
	}
	if !declared && len(pos) >= 3 {
		if fi, err := os.Stat(pos[0]); err == nil && fi.IsDir() {
			detail += fmt.Sprintf("\n%s is a directory: to run %s in %s of the configuration there, write:\n  sbx %s %s %s -- %s",
				quoteText(pos[0]), quoteText(pos[2]), quoteText(pos[1]), verb, shellQuote(pos[0]), shellQuote(pos[1]), shellJoin(pos[2:]))
		}
	}
	errorDetail(env, summary, detail)
}

// shellJoin writes args as a POSIX shell would read them back.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_./:=@%+, (control characters escaped, as
// quoteText does).
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return quoteText("'" + strings.ReplaceAll(s, "'", `'\''`) + "'")
}

// guestArgs are what "sbx run" and "sbx exec" share: [DIR] SANDBOX --
// COMMAND and the options of the command run in the guest.
type guestArgs struct {
	dir     string
	sandbox string
	command []string
	dashes  bool     // "--" was written
	pos     []string // the positional arguments
	user    string
	env     stringList
	workdir string
	stdin   bool
	tty     bool
	timeout time.Duration
}

// notRunning is notRunning for the sandbox name of a's arguments.
func (a *guestArgs) notRunning(env *Env, verb, name string) {
	var pos []string
	if !a.dashes {
		pos = a.pos
	}
	notRunning(env, verb, a.dir, name, pos)
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
		flagError(env, verb, err)
		return ExitError, false
	}
	a.pos = flags.Args()
	if a.dir, a.sandbox, a.command, a.dashes, ok = sandboxCommand(env, verb, a.pos); !ok {
		return ExitError, false
	}
	if _, err := hostenv.Parse(a.env); err != nil {
		usageError(env, verb, "Invalid -e", "-e "+quoteErr(err))
		return ExitError, false
	}
	// The checks that need no guest come before anything boots or is
	// reached: here those that need no spec either, and checkEnv once
	// the spec is read.
	if err := guestconn.CheckUser(a.user); err != nil {
		usageError(env, verb, "Invalid -u", "-u "+quoteErr(err))
		return ExitError, false
	}
	if err := guestconn.CheckDir(a.workdir); err != nil {
		usageError(env, verb, "Invalid -w", "-w "+quoteErr(err))
		return ExitError, false
	}
	return ExitOK, true
}

// checkEnv refuses -e entries that the sandbox's policy p keeps from its
// commands (sandboxnet.CheckEnv), printing a usage error of verb; ok is
// false when it did. It runs before the sandbox is built, booted or
// reached.
func (a *guestArgs) checkEnv(v *view, verb string, p policy.Sandbox) (ok bool) {
	if err := sandboxnet.CheckEnv(p, a.env); err != nil {
		v.usageError(verb, "Invalid -e", "-e "+quoteErr(err))
		return false
	}
	return true
}
