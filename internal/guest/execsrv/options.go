package execsrv

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// Options configure Serve.
type Options struct {
	// Root is the guest's root directory: "/" in the guest, a temporary
	// directory in tests. File transfers resolve their paths under it
	// and the default Users reads Root/etc/passwd and Root/etc/group.
	// It is a convenience for tests, not a confinement: the host is
	// trusted with the whole guest, and the processes Serve starts see
	// the real file system.
	Root string
	// Users resolves Exec.User; nil means PasswdFiles{Root: Root}.
	Users Users
	// Reaper starts processes and reports their exit statuses. As PID 1
	// the agent must pass the one reaper that waits for every child
	// (an *InitReaper); nil means ChildWaiter, which is right only for a
	// process that is not PID 1 and runs no other reaper.
	Reaper Reaper
	// Logger receives session starts and ends and protocol errors; nil
	// discards them.
	Logger *slog.Logger
	// MaxSessions bounds the sessions running at once; a request beyond
	// it is refused with code "busy". Zero means DefaultMaxSessions.
	MaxSessions int
	// Software names the agent in its hello, such as "sbx-guest v0.3.0".
	Software string
	// Configurer applies the host's configure requests and gives every
	// exec the defaults they set; nil refuses them (code
	// "unsupported") and leaves "configure" out of the hello. The
	// agent passes the same one to every connection, so a new
	// connection keeps what an earlier one configured.
	Configurer Configurer
	// WaitDelay is how long output may stay silent, once the process
	// has exited, before Serve stops waiting for its end and reports the
	// exit: a background process that inherited stdout would otherwise
	// hold the session open. Zero means DefaultWaitDelay.
	WaitDelay time.Duration
}

// Defaults for Options fields left zero.
const (
	DefaultMaxSessions = 64
	DefaultWaitDelay   = time.Second
)

// Configurer applies configure requests (agentproto.Configure) and holds
// the environment they set. *guestcfg.State is the agent's.
type Configurer interface {
	// Configure applies a request; its error goes back to the host.
	Configure(ctx context.Context, req agentproto.Configure) error
	// Env returns the "KEY=value" defaults of every exec, which come
	// after the user's (PATH, HOME...) and before the exec's own Env.
	Env() []string
}

// Reaper starts processes and hands back their exit statuses. It exists
// because the guest agent is PID 1: it must reap every orphan that the
// kernel reparents to it, by waiting for any child, and such a wait also
// collects the processes Serve started, whose exit statuses would then be
// lost to os/exec (whose Wait fails with ECHILD). So Serve never waits for
// a process itself. It starts each one through Start, and the reaper
// delivers that process's status on the channel Start returns.
//
// The contract: Start calls start, which forks the process and returns
// its pid, and registers that pid before any wait for it can be
// dispatched (InitReaper holds its lock across start and across the
// dispatch of each reaped pid, so a child that exits at once is still
// delivered). The channel receives exactly one status and is never
// closed before. The reaper discards statuses of children nobody
// registered (orphans). A pid is never waited for twice.
type Reaper interface {
	Start(start func() (pid int, err error)) (<-chan syscall.WaitStatus, error)
}
