package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

const execUsage = `
Usage: sbx exec [options] [DIR] SANDBOX -- COMMAND [ARG...]

  Run COMMAND in the running sandbox SANDBOX of the configuration in DIR
  (default: the current directory), through the sandbox's supervisor.
  Output streams as the command writes it; sbx exits with the command's
  exit code, or 128 plus the signal's number when a signal killed it, or,
  as shells do, 127 when the guest has no such command and 126 when it
  cannot execute it.
  Several sbx exec may run in one sandbox at once.

  Interrupting sbx (Ctrl-C), passing the -timeout or losing the
  connection kills the command's process group in the guest; the sandbox
  keeps running.

Options:

  -u USER             Run as USER (a name or uid in the image, or uid:gid).
                      Default: the sandbox's user, else root.
  -e KEY=VALUE        Set an environment variable; may be repeated. The
                      image's and the sandbox's env come first.
  -w DIR              Working directory in the guest, an absolute path.
                      Default: the user's home directory.
  -i                  Pass standard input to the command.
  -t                  Run the command on a pseudo-terminal the size of this
                      terminal, resized with it (with -i and a terminal on
                      standard input, typing reaches it, in raw mode).
  -timeout DURATION   Kill the command if it runs longer (e.g. 10m); sbx
                      then exits with 124. Default: no limit.

  Supervisors keep their sockets under $SBX_RUNTIME_DIR, else
  $XDG_RUNTIME_DIR/sbx, else ~/.local/state/sbx/run (or
  $XDG_STATE_HOME/sbx/run) when short enough for socket paths, else
  sbx-UID in the temporary directory; each must be yours, mode 0700.
`

type execArgs struct {
	guestArgs
}

func runExec(ctx context.Context, env *Env, args []string) int {
	var a execArgs
	flags := newFlagSet("exec")
	a.register(flags)
	if code, ok := a.parse(env, "exec", execUsage, flags, args); !ok {
		return code
	}

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	name := strings.TrimPrefix(a.sandbox, "sandbox.")
	dir, err := runtimeDir(env, a.dir, name)
	if err != nil {
		errorFrom(env, fmt.Sprintf("Cannot find sandbox.%s", name), err, true)
		return ExitError
	}
	spec, err := supervisor.ReadSpec(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			a.notRunning(env, "exec", name)
		} else {
			errorFrom(env, fmt.Sprintf("Cannot read the spec of sandbox.%s", name), err, true)
		}
		return ExitError
	}
	if !a.checkEnv(newView(env, false), "exec", spec.Policy) {
		return ExitError
	}
	c, err := supervisor.Dial(ctx, dir)
	if err != nil {
		if errors.Is(err, supervisor.ErrNotRunning) {
			a.notRunning(env, "exec", name)
		} else {
			errorFrom(env, fmt.Sprintf("Cannot reach sandbox.%s", name), err, true)
		}
		return ExitError
	}
	defer c.Close()
	return a.exec(ctx, env, c, spec)
}

// exec runs the command through the supervisor's connection and returns
// sbx's exit code.
func (a *execArgs) exec(ctx context.Context, env *Env, c *guestconn.Client, spec *supervisor.Spec) int {
	user := a.user
	if user == "" {
		user = spec.User
	}
	vars := append(slices.Clip(spec.Env), a.env...)
	g := guestCommand{verb: "exec", target: "sandbox." + strings.TrimPrefix(a.sandbox, "sandbox."), stdin: a.stdin, tty: a.tty, timeout: a.timeout}
	return g.run(ctx, env, guestconn.Cmd{Args: a.command, Env: vars, Dir: a.workdir, User: user}, c.Exec)
}
