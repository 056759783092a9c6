//go:build linux

package sandboxfs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"
	"github.com/sbx-dev/sbx/policy"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The log of a mount's port says when the guest's first message came
// and when the first answer went: what tells, of a mount that never
// finishes, whether the host saw the version request.
func TestServeLogsFirstExchange(t *testing.T) {
	var logs syncBuffer
	s, err := Open([]Mount{{Policy: policy.Mount{Guest: "/workspace", Access: policy.ReadWrite}, HostDir: t.TempDir()}},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host, guest := socketpair.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Ports()["sbx.vfs.0"].Serve(ctx, host) }()

	// Before the guest speaks, the port is served and nothing more.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "serving the mount's port"); {
		if time.Now().After(deadline) {
			t.Fatalf("log: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(logs.String(), "first message") {
		t.Errorf("a first message logged before the guest sent one: %s", logs.String())
	}

	tversion := []byte("\x15\x00\x00\x00\x64\xff\xff\x00\x00\x01\x00\x08\x009P2000.L")
	if _, err := guest.Write(tversion); err != nil {
		t.Fatal(err)
	}
	guest.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 7)
	if _, err := io.ReadFull(guest, hdr); err != nil || hdr[4] != 101 {
		t.Fatalf("answer %x, %v; want an Rversion", hdr, err)
	}
	cancel()
	<-served
	got := logs.String()
	for _, want := range []string{
		`msg="vfs: first message from the guest" port=sbx.vfs.0 mount=/workspace bytes=21 type=100`,
		`msg="vfs: first answer to the guest" port=sbx.vfs.0 mount=/workspace`,
		`type=101`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log:\n%s\nwant it to hold %s", got, want)
		}
	}
	if n := strings.Count(got, "first message"); n != 1 {
		t.Errorf("%d first messages logged", n)
	}
}
