package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/atomicfile"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	ctlproto "github.com/sbx-dev/sbx/internal/proto/control"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/supervisor/router"
	"github.com/sbx-dev/sbx/policy"
)

// reloadRequest is what "reload" on the control socket carries, as one
// JSON line after the request line: the new policy and the values of its
// secrets.
type reloadRequest struct {
	Policy  policy.Sandbox    `json:"policy"`
	Secrets map[string][]byte `json:"secrets,omitempty"`
}

// reloadWait bounds how long a reload may take in the supervisor,
// configuring the guest included.
const reloadWait = 30 * time.Second

// Reload makes the supervisor serving dir enforce p from now on, with the
// given values of its secrets: new connections and requests follow it at
// once, connections to hosts p no longer allows are closed, and secrets
// keep the placeholders the guest knows (a rotated value reaches
// upstreams with no change in the guest). A secret p adds is put in the
// environment of the commands run from then on. The machine is not
// restarted. With no supervisor running the error is ErrNotRunning.
func Reload(ctx context.Context, dir string, p policy.Sandbox, secrets map[string][]byte) error {
	b, err := json.Marshal(reloadRequest{Policy: p, Secrets: secrets})
	if err != nil {
		return fmt.Errorf("supervisor: reload: %w", err)
	}
	if len(b) >= ctlproto.MaxBody {
		return fmt.Errorf("supervisor: reload: the policy takes %d bytes, more than the %d a reload carries", len(b), ctlproto.MaxBody)
	}
	return callControl(ctx, dir, "reloading", ctlproto.Request{Verb: ctlproto.Reload, Body: b}, ctlproto.Reloaded)
}

// handleReload reads a reload request's JSON line and answers it.
func (c *control) handleReload(conn net.Conn, br *bufio.Reader) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := ctlproto.ReadBody(br)
	conn.SetReadDeadline(time.Time{})
	var req reloadRequest
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err == nil && c.reload == nil {
		err = errors.New("this supervisor cannot reload")
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), reloadWait)
		err = c.reload(ctx, req)
		cancel()
	}
	if err != nil {
		ctlproto.Refuse(conn, err)
		return
	}
	ctlproto.Answer(conn, ctlproto.Reloaded)
}

// reload applies a reload request in the supervisor of dir: the sandbox
// takes the new policy (sandbox.Sandbox.Update, which configures the
// guest again through the router when the environment of its commands
// changes), and the spec file records the policy now enforced.
func reload(ctx context.Context, dir string, sb *sandbox.Sandbox, req reloadRequest, log *slog.Logger) error {
	again, err := sb.Update(ctx, req.Policy, req.Secrets)
	if err != nil {
		return err
	}
	spec, err := ReadSpec(dir)
	if err == nil {
		spec.Policy = req.Policy
		var b []byte
		if b, err = json.MarshalIndent(spec, "", "  "); err == nil {
			err = atomicfile.WriteBytes(filepath.Join(dir, SpecFile), append(b, '\n'), 0o600)
		}
	}
	if err != nil {
		log.Warn("the reloaded policy is enforced but not recorded in the spec file", "error", err)
	}
	log.Info("policy reloaded", "reconfigured", again)
	return nil
}

// configure tells the guest c through a client of the router's that may
// configure.
func configure(ctx context.Context, r *router.Router, c agentproto.Configure) error {
	host, sup, err := connPair()
	if err != nil {
		return err
	}
	go r.ServeConfigurer(sup)
	gc, err := guestconn.DialContext(ctx, host)
	if err != nil {
		host.Close()
		return err
	}
	defer gc.Close()
	return gc.Configure(ctx, c)
}

// secretsFDEnv names the variable that tells a supervisor process which
// inherited descriptor carries its secrets' values (Spawn sets it).
const secretsFDEnv = "SBX_SUPERVISOR_SECRETS_FD"

// maxSecrets bounds what a supervisor reads of its secrets.
const maxSecrets = 4 << 20

// readSecrets reads the secrets Spawn passed down its pipe, if any, and
// forgets where they came from.
func readSecrets() (map[string][]byte, error) {
	fd := os.Getenv(secretsFDEnv)
	if fd == "" {
		return nil, nil
	}
	os.Unsetenv(secretsFDEnv)
	if fd != "3" {
		return nil, fmt.Errorf("supervisor: %s=%q: secrets come on descriptor 3", secretsFDEnv, fd)
	}
	f := os.NewFile(3, "secrets")
	defer f.Close()
	f.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(io.LimitReader(f, maxSecrets+1))
	if err != nil {
		return nil, fmt.Errorf("supervisor: reading the secrets: %w", err)
	}
	if len(b) > maxSecrets {
		return nil, fmt.Errorf("supervisor: the secrets take more than %d bytes", maxSecrets)
	}
	var secrets map[string][]byte
	if err := json.Unmarshal(b, &secrets); err != nil {
		return nil, fmt.Errorf("supervisor: reading the secrets: %w", err)
	}
	return secrets, nil
}

// connPair returns the two ends of a connected unix socket pair.
func connPair() (net.Conn, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		syscall.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			if i == 0 {
				syscall.Close(fds[1])
			} else {
				conns[0].Close()
			}
			return nil, nil, fmt.Errorf("socket pair: %w", err)
		}
		conns[i] = c
	}
	return conns[0], conns[1], nil
}
