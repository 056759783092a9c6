package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

// feed is the upstream's test service, sbx.test.Feed, written out by
// hand (no generated code): Whoami (unary) answers whether the call
// carried the real token; Echo (unary) answers with the authorization
// it got; Fail answers NOT_FOUND with a custom trailer; Blob (unary)
// answers a message of the size asked for; Tick (server streaming) sends
// n messages 300 ms apart; Sum (client streaming) adds what it gets;
// Chat (bidi) answers each message as it comes.
type feed struct {
	mu    sync.Mutex
	auths []string
	// deadline is how far the last call's deadline was when it started.
	deadline time.Duration
}

func (f *feed) seen(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	a := strings.Join(md.Get("authorization"), ",")
	f.mu.Lock()
	f.auths = append(f.auths, a)
	if d, ok := ctx.Deadline(); ok {
		f.deadline = time.Until(d)
	}
	f.mu.Unlock()
	return a
}

func unary(fn func(f *feed, ctx context.Context, in *wrapperspb.BytesValue) (any, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		return fn(srv.(*feed), ctx, in)
	}
}

var feedDesc = grpc.ServiceDesc{
	ServiceName: "sbx.test.Feed",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Whoami", Handler: unary(func(f *feed, ctx context.Context, _ *wrapperspb.BytesValue) (any, error) {
			if f.seen(ctx) != "Bearer "+tokenValue {
				return nil, status.Error(codes.Unauthenticated, "bad token")
			}
			return wrapperspb.String("ok"), nil
		})},
		{MethodName: "Echo", Handler: unary(func(f *feed, ctx context.Context, _ *wrapperspb.BytesValue) (any, error) {
			return wrapperspb.String("you sent " + f.seen(ctx)), nil
		})},
		{MethodName: "Fail", Handler: unary(func(f *feed, ctx context.Context, _ *wrapperspb.BytesValue) (any, error) {
			f.seen(ctx)
			grpc.SetTrailer(ctx, metadata.Pairs("x-feed-reason", "gone", "x-feed-bin", "\x00\x01"))
			return nil, status.Error(codes.NotFound, "no such feed: ünïcode 100%")
		})},
		{MethodName: "Blob", Handler: unary(func(f *feed, ctx context.Context, in *wrapperspb.BytesValue) (any, error) {
			f.seen(ctx)
			return wrapperspb.Bytes(append(in.Value, make([]byte, 8<<20)...)), nil
		})},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Tick", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*feed).seen(ss.Context())
			in := new(wrapperspb.Int64Value)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			ss.SetHeader(metadata.Pairs("x-feed-header", "h"))
			for i := range in.Value {
				if i > 0 {
					time.Sleep(300 * time.Millisecond)
				}
				if err := ss.SendMsg(wrapperspb.String(fmt.Sprintf("tick %d", i))); err != nil {
					return err
				}
			}
			ss.SetTrailer(metadata.Pairs("x-feed-count", fmt.Sprint(in.Value)))
			return nil
		}},
		{StreamName: "Sum", ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*feed).seen(ss.Context())
			var sum int64
			for {
				in := new(wrapperspb.BytesValue)
				err := ss.RecvMsg(in)
				if errors.Is(err, io.EOF) {
					return ss.SendMsg(wrapperspb.Int64(sum))
				}
				if err != nil {
					return err
				}
				sum += int64(len(in.Value))
			}
		}},
		{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*feed).seen(ss.Context())
			for {
				in := new(wrapperspb.StringValue)
				err := ss.RecvMsg(in)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if err := ss.SendMsg(wrapperspb.String("re: " + in.Value)); err != nil {
					return err
				}
			}
		}},
	},
}

// grpcSetup runs the feed and health services on a grpc-go server with
// TLS for api.test, and a harness whose policy allows api.test with
// paths limited to the health check and the feed (not sbx.test.Admin),
// the secret "token" bound to it.
func grpcSetup(t *testing.T) (*harness, *feed, *grpc.ClientConn) {
	t.Helper()
	pki := newUpstreamPKI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.leaf(t, "api.test")}})),
		grpc.MaxRecvMsgSize(32<<20), grpc.MaxSendMsgSize(32<<20))
	f := &feed{}
	srv.RegisterService(&feedDesc, f)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l)
	t.Cleanup(srv.Stop)

	rule := allow("api.test", 4)
	rule.Paths = []string{"/grpc.health.v1.Health/Check", "/sbx.test.Feed/*"}
	p := secretSpec(pki, "api.test", []policy.AllowRule{rule}, mapping("api.test", l.Addr().String()))
	h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
	return h, f, h.grpcClient(t, "api.test:443")
}

// grpcClient is a grpc-go client dialling the engine as the guest does,
// trusting the guest CA only.
func (h *harness) grpcClient(t *testing.T, target string) *grpc.ClientConn {
	cc, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return h.dial(ctx, "tcp", addr) }),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: h.guestCA.Pool()})),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20), grpc.MaxCallSendMsgSize(32<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func bearer(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokenPH)
}

// TestGRPCThroughEngine: a health check and the feed's calls with the
// placeholder as bearer token; the upstream gets the real token.
func TestGRPCThroughEngine(t *testing.T) {
	h, f, cc := grpcSetup(t)
	ctx := bearer(t)

	hc, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health check: %v %v", hc, err)
	}
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, "/sbx.test.Feed/Whoami", wrapperspb.Bytes(nil), out); err != nil || out.Value != "ok" {
		t.Fatalf("Whoami: %q %v", out.Value, err)
	}
	f.mu.Lock()
	if len(f.auths) == 0 || f.auths[len(f.auths)-1] != "Bearer "+tokenValue {
		t.Errorf("upstream saw authorization %q", f.auths)
	}
	f.mu.Unlock()
	es := h.entriesAfter(2, func(e audit.Entry) bool { return e.Decision == audit.DecisionAllow })
	var paths []string
	for _, e := range es {
		paths = append(paths, e.Path)
		if e.Path == "/sbx.test.Feed/Whoami" && (len(e.Secrets) != 1 || e.Secrets[0] != "token" || e.Proto != "h2") {
			t.Errorf("audit entry %+v", e)
		}
	}
	if !strings.Contains(strings.Join(paths, " "), "/grpc.health.v1.Health/Check") {
		t.Errorf("audit paths %q", paths)
	}
}

// TestGRPCPathRuleRefusal: a method outside the rule's paths gets
// PERMISSION_DENIED naming the rule, as a trailers-only gRPC response,
// and never reaches the upstream.
func TestGRPCPathRuleRefusal(t *testing.T) {
	h, f, cc := grpcSetup(t)
	ctx := bearer(t)
	for _, method := range []string{"/sbx.test.Admin/Reset", "/grpc.health.v1.Health/Watch"} {
		err := cc.Invoke(ctx, method, wrapperspb.Bytes(nil), new(wrapperspb.StringValue))
		st, _ := status.FromError(err)
		if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "egress.test (main.hcl:4)") ||
			!strings.Contains(st.Message(), "allows only paths /grpc.health.v1.Health/Check, /sbx.test.Feed/*") {
			t.Errorf("%s: %v", method, err)
		}
	}
	// The shape of the answer, as a plain HTTP/2 client sees it.
	c := h.client(true)
	req := mustRequest(t, "POST", "https://api.test/sbx.test.Admin/Reset", "\x00\x00\x00\x00\x00")
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	res, body := do(t, c, req)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/grpc" || res.Header.Get("Grpc-Status") != "7" || body != "" {
		t.Errorf("refusal: %d %q %q", res.StatusCode, res.Header, body)
	}
	// A plain HTTP/2 request (not gRPC) is refused as before.
	res, body = do(t, c, mustRequest(t, "POST", "https://api.test/sbx.test.Admin/Reset", ""))
	if res.StatusCode != 403 || !strings.HasPrefix(body, "sbx egress: ") {
		t.Errorf("plain refusal: %d %q", res.StatusCode, body)
	}
	f.mu.Lock()
	if len(f.auths) != 0 {
		t.Errorf("upstream got %d calls", len(f.auths))
	}
	f.mu.Unlock()
	// The audit log has the refusals, with the status the guest got.
	var statuses []int
	for _, e := range h.entriesAfter(4, func(e audit.Entry) bool { return e.Decision == audit.DecisionDeny }) {
		if e.Decision == audit.DecisionDeny && e.RuleLine == 4 {
			statuses = append(statuses, e.Status)
		}
	}
	if fmt.Sprint(statuses) != "[200 200 200 403]" {
		t.Errorf("refusals logged with statuses %v", statuses)
	}
}

// TestGRPCTrailersAndStatus: the upstream's status, message (percent-
// encoded UTF-8) and custom trailers reach the client. The answer is
// trailers-only; the calls are repeated since a trailers-only response
// proxied as headers and an empty body breaks only when the headers
// happen to be flushed first.
func TestGRPCTrailersAndStatus(t *testing.T) {
	_, _, cc := grpcSetup(t)
	for i := 0; i < 30; i++ {
		var tr metadata.MD
		err := cc.Invoke(bearer(t), "/sbx.test.Feed/Fail", wrapperspb.Bytes(nil), new(wrapperspb.StringValue), grpc.Trailer(&tr))
		st, _ := status.FromError(err)
		if st.Code() != codes.NotFound || st.Message() != "no such feed: ünïcode 100%" {
			t.Fatalf("call %d: status %v", i, err)
		}
		if got := tr.Get("x-feed-reason"); len(got) != 1 || got[0] != "gone" {
			t.Fatalf("call %d: trailers %v", i, tr)
		}
		if got := tr.Get("x-feed-bin"); len(got) != 1 || got[0] != "\x00\x01" {
			t.Fatalf("call %d: binary trailer %v", i, tr)
		}
	}
}

// TestGRPCWithoutSecrets: with no secret in the policy nothing is read,
// and a trailers-only answer still reaches the client as one.
func TestGRPCWithoutSecrets(t *testing.T) {
	pki := newUpstreamPKI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.leaf(t, "api.test")}})))
	srv.RegisterService(&feedDesc, &feed{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	h := newHarness(t, spec(pki, []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", l.Addr().String())), nil, nil)
	cc := h.grpcClient(t, "api.test:443")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 30; i++ {
		var tr metadata.MD
		err := cc.Invoke(ctx, "/sbx.test.Feed/Fail", wrapperspb.Bytes(nil), new(wrapperspb.StringValue), grpc.Trailer(&tr))
		if st, _ := status.FromError(err); st.Code() != codes.NotFound || len(tr.Get("x-feed-reason")) != 1 {
			t.Fatalf("call %d: %v, trailers %v", i, err, tr)
		}
	}
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, "/sbx.test.Feed/Echo", wrapperspb.Bytes(nil), out); err != nil || out.Value != "you sent " {
		t.Errorf("Echo: %q %v", out.Value, err)
	}
}

// TestGRPCServerStreamNotBuffered: messages sent 300 ms apart arrive
// apart, the header metadata before the first, the trailers after the
// last.
func TestGRPCServerStreamNotBuffered(t *testing.T) {
	_, _, cc := grpcSetup(t)
	s, err := cc.NewStream(bearer(t), &grpc.StreamDesc{ServerStreams: true}, "/sbx.test.Feed/Tick")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.Int64(4)); err != nil {
		t.Fatal(err)
	}
	s.CloseSend()
	hd, err := s.Header()
	if err != nil || len(hd.Get("x-feed-header")) != 1 {
		t.Errorf("header %v %v", hd, err)
	}
	var at []time.Time
	for i := 0; ; i++ {
		m := new(wrapperspb.StringValue)
		err := s.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Value != fmt.Sprintf("tick %d", i) {
			t.Errorf("message %d: %q", i, m.Value)
		}
		at = append(at, time.Now())
	}
	if len(at) != 4 {
		t.Fatalf("%d messages", len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 150*time.Millisecond {
			t.Errorf("message %d came %v after the one before: held back", i, gap)
		}
	}
	if got := s.Trailer().Get("x-feed-count"); len(got) != 1 || got[0] != "4" {
		t.Errorf("trailer %v", s.Trailer())
	}
}

// TestGRPCClientAndBidiStreams: client streaming with large messages,
// bidi with each answer read before the next message is sent.
func TestGRPCClientAndBidiStreams(t *testing.T) {
	_, _, cc := grpcSetup(t)
	ctx := bearer(t)
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/sbx.test.Feed/Sum")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.SendMsg(wrapperspb.Bytes(make([]byte, 5<<20))); err != nil {
			t.Fatal(err)
		}
	}
	s.CloseSend()
	sum := new(wrapperspb.Int64Value)
	if err := s.RecvMsg(sum); err != nil || sum.Value != 15<<20 {
		t.Errorf("Sum: %d %v", sum.Value, err)
	}

	b, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/sbx.test.Feed/Chat")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := b.SendMsg(wrapperspb.String(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		m := new(wrapperspb.StringValue)
		if err := b.RecvMsg(m); err != nil || m.Value != fmt.Sprintf("re: %d", i) {
			t.Fatalf("Chat %d: %q %v", i, m.Value, err)
		}
	}
	b.CloseSend()
	if err := b.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Errorf("Chat end: %v", err)
	}
}

// TestGRPCLargeMessages: an 8 MiB answer goes through whole, also gzip
// compressed (the request compressed, so the server compresses too).
func TestGRPCLargeMessages(t *testing.T) {
	_, _, cc := grpcSetup(t)
	for _, opts := range [][]grpc.CallOption{nil, {grpc.UseCompressor(gzip.Name)}} {
		out := new(wrapperspb.BytesValue)
		if err := cc.Invoke(bearer(t), "/sbx.test.Feed/Blob", wrapperspb.Bytes([]byte("head")), out, opts...); err != nil {
			t.Fatalf("Blob %v: %v", opts, err)
		}
		if len(out.Value) != 4+8<<20 || string(out.Value[:4]) != "head" {
			t.Errorf("Blob %v: %d bytes", opts, len(out.Value))
		}
	}
}

// TestGRPCEchoedSecretEndsStream: an answer that quotes the real token
// cannot be masked without breaking its encoding; the client gets
// INTERNAL saying so, and neither the value nor a broken message.
func TestGRPCEchoedSecretEndsStream(t *testing.T) {
	_, _, cc := grpcSetup(t)
	for _, opts := range [][]grpc.CallOption{nil, {grpc.UseCompressor(gzip.Name)}} {
		out := new(wrapperspb.StringValue)
		err := cc.Invoke(bearer(t), "/sbx.test.Feed/Echo", wrapperspb.Bytes(nil), out, opts...)
		st, _ := status.FromError(err)
		if st.Code() != codes.Internal || !strings.Contains(st.Message(), "held a secret's value") {
			t.Errorf("Echo %v: %q %v", opts, out.Value, err)
		}
		if strings.Contains(fmt.Sprint(err, out), tokenValue[:12]) {
			t.Errorf("the value reached the client: %v %q", err, out.Value)
		}
	}
}

// TestGRPCTimeoutAndTE: grpc-timeout and te: trailers reach the upstream
// (here grpc-go's ServeHTTP behind net/http, which shows the headers).
func TestGRPCTimeoutAndTE(t *testing.T) {
	pki := newUpstreamPKI(t)
	srv := grpc.NewServer()
	f := &feed{}
	srv.RegisterService(&feedDesc, f)
	seen := make(chan http.Header, 10)
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		srv.ServeHTTP(w, r)
	}), "api.test")
	p := secretSpec(pki, "api.test", []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", serverAddr(up)))
	h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
	cc := h.grpcClient(t, "api.test:443")
	ctx, cancel := context.WithTimeout(bearer(t), 7*time.Second)
	defer cancel()
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, "/sbx.test.Feed/Whoami", wrapperspb.Bytes(nil), out); err != nil || out.Value != "ok" {
		t.Fatalf("Whoami: %q %v", out.Value, err)
	}
	hd := <-seen
	if hd.Get("Te") != "trailers" || hd.Get("Grpc-Timeout") == "" {
		t.Errorf("upstream headers %v", hd)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deadline <= 5*time.Second || f.deadline > 7*time.Second {
		t.Errorf("upstream deadline %v", f.deadline)
	}
}

// grpcFrame is one length-prefixed gRPC message.
func grpcFrame(flag byte, msg []byte) []byte {
	return append([]byte{flag, byte(len(msg) >> 24), byte(len(msg) >> 16), byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// oneByteReader hands out its bytes one at a time, as a slow upstream
// might.
type oneByteReader struct{ b []byte }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	p[0], o.b = o.b[0], o.b[1:]
	return 1, nil
}

func (o *oneByteReader) Close() error { return nil }

// TestGRPCMaskerEnds: what ends a gRPC response stream, read a byte at
// a time: a message holding a value (after the messages before it pass
// unchanged), one over the bound, one compressed other than with gzip,
// and a body cut inside a message; a message that merely ends like the
// start of a value passes.
func TestGRPCMaskerEnds(t *testing.T) {
	pol, err := Compile(secretSpec(newUpstreamPKI(t), "api.test", nil), map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})
	if err != nil {
		t.Fatal(err)
	}
	ok1, ok2 := grpcFrame(0, []byte("first")), grpcFrame(0, []byte("ends like "+tokenValue[:5]))
	for _, c := range []struct {
		name, enc   string
		body        []byte
		pass        []byte
		code, msg   string
		errContains string
	}{
		{"clean", "", append(append([]byte(nil), ok1...), ok2...), append(append([]byte(nil), ok1...), ok2...), "", "", ""},
		{"value", "", append(append([]byte(nil), ok1...), grpcFrame(0, []byte("x"+tokenValue))...), ok1, "13", "held a secret's value", ""},
		{"run of the value", "", grpcFrame(0, []byte("token "+tokenValue[3:18]+" rejected")), nil, "13", "held a secret's value", ""},
		{"too large", "", append([]byte{0, 0x7f, 0, 0, 0}, 'x'), nil, "8", "cannot be checked", ""},
		{"other compression", "snappy", grpcFrame(1, []byte("xx")), nil, "13", `compressed with "snappy"`, ""},
		{"cut", "", grpcFrame(0, []byte("whole"))[:7], nil, "", "", "ended inside a message"},
	} {
		res := &http.Response{Header: http.Header{}, Body: &oneByteReader{b: c.body}}
		if c.enc != "" {
			res.Header.Set("Grpc-Encoding", c.enc)
		}
		got, err := io.ReadAll(newGRPCMasker(pol.mask, res, 1<<20))
		if c.errContains != "" {
			if err == nil || !strings.Contains(err.Error(), c.errContains) {
				t.Errorf("%s: err %v", c.name, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, c.pass) {
			t.Errorf("%s: passed %q, %v; want %q", c.name, got, err, c.pass)
		}
		if res.Trailer.Get("Grpc-Status") != c.code || !strings.Contains(res.Trailer.Get("Grpc-Message"), c.msg) {
			t.Errorf("%s: trailers %q", c.name, res.Trailer)
		}
	}
}

// TestGRPCOtherRefusals: the placeholder in metadata to an allowed host
// the secret is not bound to, and in a request message to it, are
// refused as PERMISSION_DENIED naming the secret; an upstream that
// cannot be reached is UNAVAILABLE.
func TestGRPCOtherRefusals(t *testing.T) {
	pki := newUpstreamPKI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.leaf(t, "api.test", "other.test")}})))
	f := &feed{}
	srv.RegisterService(&feedDesc, f)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	p := secretSpec(pki, "api.test", []policy.AllowRule{allow("api.test", 4), allow("other.test", 5), allow("down.test", 6)},
		mapping("api.test", l.Addr().String()), mapping("other.test", l.Addr().String()), mapping("down.test", closedAddr))
	h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH})

	other := h.grpcClient(t, "other.test:443")
	err = other.Invoke(bearer(t), "/sbx.test.Feed/Whoami", wrapperspb.Bytes(nil), new(wrapperspb.StringValue))
	if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `secret "token"`) {
		t.Errorf("placeholder in metadata to other.test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := other.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/sbx.test.Feed/Sum")
	if err != nil {
		t.Fatal(err)
	}
	s.SendMsg(wrapperspb.Bytes([]byte("the key is " + tokenPH)))
	s.CloseSend()
	err = s.RecvMsg(new(wrapperspb.Int64Value))
	if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `secret "token"`) {
		t.Errorf("placeholder in a message to other.test: %v", err)
	}
	f.mu.Lock()
	for _, a := range f.auths {
		if strings.Contains(a, tokenValue) {
			t.Errorf("other.test saw the value: %q", a)
		}
	}
	f.mu.Unlock()

	err = h.grpcClient(t, "down.test:443").Invoke(ctx, "/sbx.test.Feed/Whoami", wrapperspb.Bytes(nil), new(wrapperspb.StringValue))
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.HasPrefix(st.Message(), "sbx egress: upstream down.test") {
		t.Errorf("unreachable upstream: %v", err)
	}
}
