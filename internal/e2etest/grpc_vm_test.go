package e2etest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/egress/audit"
)

const grpcSecret = "grpc-real-token-7f3e9a1c5b2d4e6f"

// grpcCalls records the method and authorization of every call the
// test's gRPC server gets.
type grpcCalls struct {
	mu    sync.Mutex
	calls []string
}

func (c *grpcCalls) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	c.mu.Lock()
	c.calls = append(c.calls, method+" "+strings.Join(md.Get("authorization"), ","))
	c.mu.Unlock()
}

func (c *grpcCalls) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// tickDesc is sbx.test.Feed with its one server-streaming method, Tick:
// n messages 400 ms apart, then an x-feed-count trailer.
var tickDesc = grpc.ServiceDesc{
	ServiceName: "sbx.test.Feed",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "Tick", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
		in := new(wrapperspb.Int64Value)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		for i := range in.Value {
			if i > 0 {
				time.Sleep(400 * time.Millisecond)
			}
			if err := ss.SendMsg(wrapperspb.String(fmt.Sprintf("tick %d", i))); err != nil {
				return err
			}
		}
		ss.SetTrailer(metadata.Pairs("x-feed-count", strconv.FormatInt(in.Value, 10)))
		return nil
	}}},
}

// TestGRPCInVM runs a grpc-go client in a sandbox (testdata/grpc) against
// a grpc-go server on the host's loopback that api.test is mapped to,
// with the secret's placeholder as its bearer token: the health check
// and the server-streaming Tick pass, the server sees the real token,
// Tick's messages arrive as they are sent and its trailer with them; a
// method the path rule leaves out is refused with PERMISSION_DENIED
// naming the rule, which the client prints, and never reaches the
// server. The guest's output never holds the real value.
func TestGRPCInVM(t *testing.T) {
	cfgDir := t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	buildGuestTool(t, "./testdata/grpc/grpccall", filepath.Join(cfgDir, "grpccall"))

	caPEM, cert := testPKI(t, "api.test")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	calls := &grpcCalls{}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			calls.record(ctx, info.FullMethod)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			calls.record(ss.Context(), info.FullMethod)
			return h(s, ss)
		}))
	srv.RegisterService(&tickDesc, nil)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l)
	defer srv.Stop()

	tmpl, err := os.ReadFile("testdata/grpc/sbx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.ReplaceAll(string(tmpl), "@UPSTREAM@", l.Addr().String())
	ruleLine := 0
	for i, line := range strings.Split(spec, "\n") {
		if strings.TrimSpace(line) == `request "api.test" {` {
			ruleLine = i + 1
		}
	}
	for name, data := range map[string]string{"sbx.hcl": spec, "upstream-ca.pem": string(caPEM)} {
		if err := os.WriteFile(filepath.Join(cfgDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	auditDir := t.TempDir()
	start := time.Now()
	sb, err := sbx.Start(ctx, cfg, "grpc", sbx.StartOptions{
		Environ:  append(environ[:len(environ):len(environ)], "SBX_GRPC_TEST_TOKEN="+grpcSecret),
		AuditDir: auditDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	t.Logf("built and booted in %v", time.Since(start).Round(time.Second))

	var out bytes.Buffer
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Minute)
	st, err := sb.Exec(rctx, sbx.Cmd{Args: []string{"/usr/local/bin/grpccall"}, Stdout: &out, Stderr: &out})
	rcancel()
	got := out.String()
	t.Logf("grpccall:\n%s", got)
	if err != nil || st.Code != 0 {
		t.Fatalf("grpccall: %v %v\n%s", st, err, got)
	}
	if strings.Contains(got, grpcSecret) || strings.Contains(got, grpcSecret[:12]) {
		t.Errorf("the real value reached the guest:\n%s", got)
	}
	if !strings.Contains(got, "health SERVING\n") {
		t.Errorf("no health check:\n%s", got)
	}
	// Each message arrives as it is sent: 400 ms apart.
	ms := regexp.MustCompile(`(?m)^tick (\d) at (\d+)ms$`).FindAllStringSubmatch(got, -1)
	if len(ms) != 3 {
		t.Errorf("ticks: %q", ms)
	} else {
		for i := 1; i < 3; i++ {
			a, _ := strconv.Atoi(ms[i-1][2])
			b, _ := strconv.Atoi(ms[i][2])
			if b-a < 200 {
				t.Errorf("tick %d came %d ms after tick %d: held back", i, b-a, i-1)
			}
		}
	}
	if !strings.Contains(got, "trailer x-feed-count [3]\n") {
		t.Errorf("no trailer:\n%s", got)
	}
	prefix := `Reset: code=PermissionDenied message="sbx egress: POST /sbx.test.Admin/Reset to api.test is not allowed by egress.grpc (`
	want := fmt.Sprintf(`sbx.hcl:%d), which allows only paths /grpc.health.v1.Health/Check, /sbx.test.Feed/*`, ruleLine)
	if !strings.Contains(got, prefix) || !strings.Contains(got, want) {
		t.Errorf("Reset: want PermissionDenied naming the rule (%s):\n%s", want, got)
	}

	wantCalls := []string{"/grpc.health.v1.Health/Check Bearer " + grpcSecret, "/sbx.test.Feed/Tick Bearer " + grpcSecret}
	if c := calls.all(); strings.Join(c, "\n") != strings.Join(wantCalls, "\n") {
		t.Errorf("the server got %q, want %q", c, wantCalls)
	}

	sb.Stop(context.Background())
	es, err := audit.Tail(auditDir, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var denied bool
	for _, e := range es {
		if e.Path == "/sbx.test.Admin/Reset" && e.Decision == audit.DecisionDeny && e.RuleLine == ruleLine {
			denied = true
		}
		if e.Path == "/sbx.test.Feed/Tick" && (e.Decision != audit.DecisionAllow || len(e.Secrets) != 1 || e.Secrets[0] != "token") {
			t.Errorf("Tick's audit entry: %+v", e)
		}
	}
	if !denied {
		t.Errorf("no audit entry for the refused Reset at line %d: %+v", ruleLine, es)
	}
}
