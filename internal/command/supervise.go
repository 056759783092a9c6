package command

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// runSupervise is the hidden verb "sbx supervise DIR": the detached
// process supervisor.Spawn starts, which runs the sandbox described in
// DIR/spec.json until "sbx stop" (supervisor.Stop), SIGTERM or SIGINT.
// Its output goes to DIR/supervisor.log.
func runSupervise(ctx context.Context, env *Env, args []string) int {
	var snapshots string
	if len(args) == 2 {
		if v, ok := strings.CutPrefix(args[0], supervisor.SnapshotsFlag+"="); ok && v != "" {
			snapshots, args = v, args[1:]
		}
	}
	if len(args) != 1 {
		errorDetail(env, "Invalid arguments", "sbx supervise takes the supervisor's directory, after "+supervisor.SnapshotsFlag+"=DIR if warm starts are made (this command is started by sbx itself).")
		return ExitError
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(env.Stderr, nil))
	if err := supervisor.RunDir(ctx, args[0], supervisor.Options{
		Logger:         log,
		Snapshots:      snapshots,
		MountTransport: sandboxfs.Transport(hostenv.Get(env.Environ, sandboxfs.EnvTransport)),
	}); err != nil {
		errorFrom(env, "The supervisor failed", err, false)
		return ExitError
	}
	return ExitOK
}
