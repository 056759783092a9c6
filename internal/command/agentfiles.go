package command

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/agentbridge"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// fileHookBound is how long a file tool's hook may take to reach the
// session's sandbox (starting it if need be): well below the hook's
// timeout, past which Claude Code would run the call unchanged.
const fileHookBound = 20 * time.Second

// shadowDir is the session's shadow directory: in its supervisor
// directory (mode 0700, per user), removed with it.
func shadowDir(sdir string) string { return filepath.Join(sdir, "shadow") }

// decideFile routes a file tool's hook through the session's sandbox.
// Whatever fails blocks the call.
func decideFile(ctx context.Context, env *Env, r agentbridge.Route, in agentbridge.Input) agentbridge.Decision {
	ctx, cancel := context.WithTimeout(ctx, fileHookBound)
	defer cancel()
	var errs bytes.Buffer
	quiet := *env
	quiet.Stdout, quiet.Stderr = &errs, &errs
	sdir, spec, _, ok := ensureSession(ctx, &quiet, r, in.SessionID)
	if !ok {
		return agentbridge.Block("the session's sandbox is not available: " + strings.TrimSpace(errs.String()))
	}
	c, err := supervisor.Dial(ctx, sdir)
	if err != nil {
		return agentbridge.Block("cannot reach the session's sandbox: " + err.Error())
	}
	defer c.Close()
	var mounts []agentbridge.Mount
	for _, m := range spec.Mounts {
		mounts = append(mounts, agentbridge.Mount{HostDir: m.HostDir, Policy: m.Policy})
	}
	g := &sessionGuest{exec: c.Exec, user: spec.User, env: spec.Env}
	return agentbridge.DecideFile(ctx, in, mounts, shadowDir(sdir), g)
}

// sessionGuest reads and writes guest files with commands run as the
// sandbox's user, so that the guest's permissions apply to the file
// tools as to Bash.
type sessionGuest struct {
	exec func(context.Context, guestconn.Cmd) (*guestconn.ExitStatus, error)
	user string
	env  []string
}

// Exit codes of the guest scripts.
const (
	guestRefused = 3 // not a regular file
	guestMissing = 4
)

// fetchScript prints file $1, refusing what is not a regular file (a
// symbolic link is not followed) and reading at most $2 bytes.
const fetchScript = `f=$1
if [ -L "$f" ]; then echo "it is a symbolic link" >&2; exit 3; fi
if [ ! -e "$f" ]; then exit 4; fi
if [ ! -f "$f" ]; then echo "it is not a regular file" >&2; exit 3; fi
exec head -c "$2" -- "$f"`

// pushScript writes its standard input to file $1 (making its
// directory), refusing a symbolic link or anything but a regular file in
// its place.
const pushScript = `f=$1
if [ -L "$f" ]; then echo "it is a symbolic link" >&2; exit 3; fi
if [ -e "$f" ] && [ ! -f "$f" ]; then echo "it is not a regular file" >&2; exit 3; fi
mkdir -p -- "${f%/*}" && cat > "$f"`

// limitedBuffer keeps at most max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.Buffer.Write(p)
	return len(p), nil
}

func (g *sessionGuest) run(ctx context.Context, script string, stdin []byte, stdout *limitedBuffer, args ...string) (int, string, error) {
	stderr := &limitedBuffer{max: 4096}
	cmd := guestconn.Cmd{Args: append([]string{"/bin/sh", "-c", script, "sbx-file"}, args...), Env: g.env, User: g.user, Dir: "/", Stdout: stdout, Stderr: stderr}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	st, err := g.exec(ctx, cmd)
	if err != nil {
		return 0, "", err
	}
	return st.Code, strings.TrimSpace(stderr.String()), nil
}

func (g *sessionGuest) Fetch(ctx context.Context, path string, limit int) ([]byte, bool, error) {
	out := &limitedBuffer{max: limit}
	code, msg, err := g.run(ctx, fetchScript, nil, out, path, strconv.Itoa(limit+1))
	switch {
	case err != nil:
		return nil, false, err
	case code == guestMissing:
		return nil, false, nil
	case code != 0:
		return nil, false, fmt.Errorf("%s (exit %d)", msg, code)
	case out.over:
		return nil, false, fmt.Errorf("it is larger than %d bytes", limit)
	}
	return out.Bytes(), true, nil
}

func (g *sessionGuest) Push(ctx context.Context, path string, data []byte) error {
	code, msg, err := g.run(ctx, pushScript, data, &limitedBuffer{max: 4096}, path)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s (exit %d)", msg, code)
	}
	return nil
}
