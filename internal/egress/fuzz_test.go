package egress

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/policy"
)

// FuzzGuestBytes feeds arbitrary bytes to a connection as the guest
// would: whatever they are, ServeFlow must answer or close, and return
// promptly once the guest is gone, without a panic.
func FuzzGuestBytes(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n"), false)
	f.Add([]byte("GET / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nzzzz"), false)
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"), false)
	f.Add([]byte("CONNECT x:1 HTTP/1.1\r\n\r\n"), false)
	f.Add([]byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"), true)
	f.Add([]byte("\x16\x03\x01\xff\xff"), true)
	f.Add([]byte{}, true)
	gca, err := ca.New()
	if err != nil {
		f.Fatal(err)
	}
	p, err := Compile(policy.Sandbox{
		Allow: []policy.AllowRule{allow("api.test", 4)},
		Hosts: []policy.HostMapping{mapping("api.test", "127.0.0.1:1")},
	}, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	eng, err := NewEngine(p, Options{CA: gca, HandshakeTimeout: 200 * time.Millisecond,
		ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, tlsPort bool) {
		port := uint16(80)
		if tlsPort {
			port = 443
		}
		guest, host := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			eng.ServeFlow(context.Background(), "api.test", port, host)
		}()
		_ = guest.SetDeadline(time.Now().Add(2 * time.Second))
		go guest.Write(data)
		io.Copy(io.Discard, guest)
		guest.Close()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("ServeFlow still running 3s after the guest left")
		}
	})
}
