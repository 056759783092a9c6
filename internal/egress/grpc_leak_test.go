package egress

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sbx-dev/sbx/policy"
)

// leakDesc is an upstream service that quotes the real token outside its
// messages: Status in the status message of a trailers-only answer,
// Metadata in header metadata, a trailer and a binary (-bin) trailer.
var leakDesc = grpc.ServiceDesc{
	ServiceName: "sbx.test.Leak",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Status", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.BytesValue)); err != nil {
				return nil, err
			}
			return nil, status.Error(codes.Unauthenticated, "bad token "+tokenValue)
		}},
		{MethodName: "Metadata", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.BytesValue)); err != nil {
				return nil, err
			}
			grpc.SetHeader(ctx, metadata.Pairs("x-leak", "h "+tokenValue))
			grpc.SetTrailer(ctx, metadata.Pairs("x-leak", "t "+tokenValue, "x-leak-bin", tokenValue))
			return wrapperspb.String("fine"), nil
		}},
	},
	Streams: []grpc.StreamDesc{{StreamName: "Quiet", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
		if err := ss.RecvMsg(new(wrapperspb.BytesValue)); err != nil {
			return err
		}
		time.Sleep(1500 * time.Millisecond) // nothing to send yet, so no headers either
		return ss.SendMsg(wrapperspb.String("event"))
	}}},
}

func leakSetup(t *testing.T, tune ...func(*Options)) *grpc.ClientConn {
	t.Helper()
	pki := newUpstreamPKI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.leaf(t, "api.test")}})))
	srv.RegisterService(&leakDesc, struct{}{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	p := secretSpec(pki, "api.test", []policy.AllowRule{allow("api.test", 4)}, mapping("api.test", l.Addr().String()))
	h := newHarness(t, p, map[string][]byte{"token": []byte(tokenValue)}, map[string]string{"token": tokenPH}, tune...)
	return h.grpcClient(t, "api.test:443")
}

// TestGRPCMetadataMasked: the real token in a trailers-only status
// message, in header metadata, in a trailer and in a binary trailer
// reaches the client as the placeholder, and the call still succeeds.
func TestGRPCMetadataMasked(t *testing.T) {
	cc := leakSetup(t)
	err := cc.Invoke(bearer(t), "/sbx.test.Leak/Status", wrapperspb.Bytes(nil), new(wrapperspb.StringValue))
	if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated || st.Message() != "bad token "+tokenPH {
		t.Errorf("trailers-only status: %v", err)
	}
	var hd, tr metadata.MD
	out := new(wrapperspb.StringValue)
	err = cc.Invoke(bearer(t), "/sbx.test.Leak/Metadata", wrapperspb.Bytes(nil), out, grpc.Header(&hd), grpc.Trailer(&tr))
	if err != nil || out.Value != "fine" {
		t.Fatalf("Metadata: %v %q", err, out.Value)
	}
	for _, c := range []struct{ name, got, want string }{
		{"header", strings.Join(hd.Get("x-leak"), ","), "h " + tokenPH},
		{"trailer", strings.Join(tr.Get("x-leak"), ","), "t " + tokenPH},
		{"binary trailer", strings.Join(tr.Get("x-leak-bin"), ","), tokenPH},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}

// TestGRPCQuietStreamHeaderLimit: a server stream whose upstream sends
// nothing, headers included, for longer than the upstream response
// header limit (Upstream.ResponseHeaderTimeout, 10 minutes by default)
// is ended with DEADLINE_EXCEEDED, though the client set no deadline.
func TestGRPCQuietStreamHeaderLimit(t *testing.T) {
	cc := leakSetup(t, func(o *Options) { o.Upstream.ResponseHeaderTimeout = 500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/sbx.test.Leak/Quiet")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.Bytes(nil)); err != nil {
		t.Fatal(err)
	}
	s.CloseSend()
	err = s.RecvMsg(new(wrapperspb.StringValue))
	if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "timeout awaiting response headers") {
		t.Errorf("quiet stream: %v", err)
	}
}
