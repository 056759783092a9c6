// Command grpccall is the guest's gRPC client in TestGRPCInVM: with the
// placeholder in $TOKEN as its bearer token it calls api.test:443's
// health check, the server-streaming /sbx.test.Feed/Tick (printing when
// each message arrives) and /sbx.test.Admin/Reset, which the sandbox's
// path rule leaves out, printing each status as grpc-go reports it.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run() error {
	roots, err := x509.SystemCertPool() // SSL_CERT_FILE: the sbx CA
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient("api.test:443", grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots})))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+os.Getenv("TOKEN"))

	hc, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	fmt.Println("health", hc.Status)

	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/sbx.test.Feed/Tick")
	if err != nil {
		return err
	}
	if err := s.SendMsg(wrapperspb.Int64(3)); err != nil {
		return err
	}
	s.CloseSend()
	start := time.Now()
	for {
		m := new(wrapperspb.StringValue)
		err := s.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("Tick: %w", err)
		}
		fmt.Printf("%s at %dms\n", m.Value, time.Since(start).Milliseconds())
	}
	fmt.Println("trailer x-feed-count", s.Trailer().Get("x-feed-count"))

	err = cc.Invoke(ctx, "/sbx.test.Admin/Reset", wrapperspb.String(""), new(wrapperspb.StringValue))
	st, _ := status.FromError(err)
	fmt.Printf("Reset: code=%s message=%q\n", st.Code(), st.Message())
	return nil
}
