package sandboxnet_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/policy"
)

// tlsUpstream starts h as an HTTPS server with cert, speaking HTTP/2 too
// when h2 is set, and returns its address; it is closed once the test
// and its sandbox are done.
func tlsUpstream(t *testing.T, cert tls.Certificate, h2 bool, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// vmSandbox is a test's sandbox: the machine, its network (the egress
// engine under the test's policy) and the audit directory it writes.
type vmSandbox struct {
	// ctx bounds everything the test does with the sandbox.
	ctx      context.Context
	m        *machine.Machine
	n        *sandboxnet.Net
	auditDir string
}

// bootVM boots img as the sandbox name, of 512 MiB, with pol and secrets
// and a CA of its own; ctx gives the test timeout from here. At the end
// of the test the sandbox is stopped: its machine, then its network.
func bootVM(t *testing.T, img *image.Result, name string, timeout time.Duration, pol policy.Sandbox, secrets map[string][]byte) *vmSandbox {
	t.Helper()
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	auditDir := t.TempDir()
	mdir, err := os.MkdirTemp("", "sbx-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(mdir) })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.Start(ctx, sandbox.Spec{Name: name, Image: si, Memory: 512 << 20, Policy: pol},
		sandbox.Options{Dir: mdir, Secrets: secrets, AuditDir: auditDir, CA: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Stop(context.Background()) })
	return &vmSandbox{ctx: ctx, m: sb.Machine(), n: sb.Net(), auditDir: auditDir}
}

// install builds testdata/<prog> for the guest and puts it at path,
// executable.
func (s *vmSandbox) install(t *testing.T, prog, path string) {
	t.Helper()
	if err := s.m.Put(s.ctx, bytes.NewReader(guestProgram(t, prog)), path, 0o755, nil); err != nil {
		t.Fatal(err)
	}
}

// exec runs args in the guest as user within timeout and returns what
// it wrote to stdout and stderr, and its exit status.
func (s *vmSandbox) exec(timeout time.Duration, user string, args ...string) (string, *guestconn.ExitStatus, error) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	st, err := s.m.Exec(ctx, guestconn.Cmd{Args: args, User: user, Stdout: &out, Stderr: &out})
	return out.String(), st, err
}

// guestProgram builds testdata/<prog> for the guest.
func guestProgram(t *testing.T, prog string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), prog)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/"+prog)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/%s: %v\n%s", prog, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
