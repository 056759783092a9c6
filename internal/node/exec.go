package node

import (
	"context"
	"fmt"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	utilexec "k8s.io/utils/exec"

	"github.com/sbx-dev/sbx/internal/guestconn"
)

// execTTY is a terminal's size until the client sends its own.
var execTTY = guestconn.PTY{Rows: 24, Cols: 80}

// exec runs cmd in the running sandbox of pod namespace/name (kubectl
// exec, virtual-kubelet's RunInContainer) with the user, working
// directory and environment of the pod's command — the placeholders of
// its secrets among them, never a value — and the client's stdin,
// stdout and stderr, on a pseudo-terminal the client resizes when it
// asks for a TTY. A non-zero exit is returned as a
// utilexec.CodeExitError, which the kubelet API reports as the exit
// code; a command killed by a signal as 128 plus its number. A pod whose
// sandbox has not booted or has ended refuses.
func (p *provider) exec(ctx context.Context, namespace, name, container string, cmd []string, attach api.AttachIO) error {
	p.mu.Lock()
	rp := p.pods[key(namespace, name)]
	p.mu.Unlock()
	if rp == nil {
		return errdefs.NotFoundf("pod %s/%s is not known", namespace, name)
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("exec needs a command")
	}
	rp.mu.Lock()
	sb, base := rp.sb, rp.cmd
	rp.mu.Unlock()
	if sb == nil {
		return errdefs.InvalidInputf("the sandbox of pod %s/%s is not running", namespace, name)
	}
	if c := rp.pod.Spec.Containers[0].Name; container != "" && container != c {
		return errdefs.NotFoundf("pod %s/%s has no container %s (its one container is %s)", namespace, name, container, c)
	}
	c := guestconn.Cmd{Args: cmd, Env: base.Env, Dir: base.Dir, User: base.User, Stdin: attach.Stdin()}
	if w := attach.Stdout(); w != nil {
		c.Stdout = w
	}
	if w := attach.Stderr(); w != nil {
		c.Stderr = w
	}
	if attach.TTY() {
		pty := execTTY
		c.PTY = &pty
		resize := attach.Resize()
		c.Started = func(pr *guestconn.Process) {
			go func() {
				for {
					select {
					case s, ok := <-resize:
						if !ok {
							return
						}
						pr.Resize(s.Height, s.Width)
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}
	st, err := sb.Exec(ctx, c)
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, name, err)
	}
	if code := st.ShellCode(); code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}
