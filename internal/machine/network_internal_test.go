package machine

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// frameRecorder is a Network that records the frames it reads.
type frameRecorder struct {
	frames chan []byte
}

func (f frameRecorder) Serve(ctx context.Context, conn net.Conn) error {
	r := netstream.NewReader(conn)
	for {
		b, err := r.ReadFrame()
		if err != nil {
			return err
		}
		select {
		case f.frames <- append([]byte(nil), b...):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// The link takes one connection, serves it with its Network, and ends
// it on close. The dialler plays QEMU's part.
func TestNetLink(t *testing.T) {
	path := filepath.Join(t.TempDir(), NetSocket)
	rec := frameRecorder{frames: make(chan []byte, 1)}
	l, err := listenNet(path, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	qemu, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer qemu.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.wait(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := netstream.NewWriter(qemu).WriteFrame([]byte("frame one")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-rec.frames:
		if string(got) != "frame one" {
			t.Errorf("the Network read %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Network read nothing")
	}
	// One connection only: the socket is gone once QEMU's is taken.
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after the first connection: %v", err)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Error("a second connection was accepted")
	}

	l.close()
	select {
	case <-l.done:
	default:
		t.Fatal("close returned before Serve")
	}
	if err := l.Err(); err != nil {
		t.Errorf("Err after close = %v, want nil: the machine ended it", err)
	}
	qemu.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := qemu.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("QEMU's end after close: %d bytes, %v; want the end", n, err)
	}
}

// A Network that fails is the link's Err; QEMU closing the connection
// is not an error, nor is anything once the machine is stopping.
func TestNetLinkEnds(t *testing.T) {
	broken := []byte{0xff, 0xff, 0xff, 0xff}
	for _, c := range []struct {
		name     string
		network  Network
		stopping bool
		write    []byte
		want     string
	}{
		{"clean", new(Sink), false, nil, ""},
		{"eof", frameRecorder{}, false, nil, ""},
		{"broken", new(Sink), false, broken, "frame 1: length prefix 0xffffffff"},
		{"broken-stopping", new(Sink), true, broken, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), NetSocket)
			l, err := listenNet(path, c.network)
			if err != nil {
				t.Fatal(err)
			}
			defer l.close()
			if c.stopping {
				l.stop()
			}
			qemu, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			qemu.Write(c.write)
			qemu.Close()
			select {
			case <-l.done:
			case <-time.After(5 * time.Second):
				t.Fatal("Serve has not returned")
			}
			err = l.Err()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("Err = %v, want %q", err, c.want)
			}
		})
	}
}

// Waiting for QEMU to connect is bounded by the context and by QEMU's
// exit, and closing the link then leaves nothing running.
func TestNetLinkNeverConnected(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		l, err := listenNet(filepath.Join(t.TempDir(), NetSocket), new(Sink))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		begin := time.Now()
		err = l.wait(ctx, nil)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "QEMU did not connect the network device") {
			t.Errorf("wait = %v", err)
		}
		if took := time.Since(begin); took > 5*time.Second {
			t.Errorf("wait took %v", took)
		}
		l.close()
		select {
		case <-l.done:
		default:
			t.Error("the accepting goroutine outlived close")
		}
	})
	t.Run("qemu-exited", func(t *testing.T) {
		l, err := listenNet(filepath.Join(t.TempDir(), NetSocket), new(Sink))
		if err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		close(exited)
		if err := l.wait(context.Background(), exited); !errors.Is(err, errQEMUExited) {
			t.Errorf("wait = %v, want %v", err, errQEMUExited)
		}
		l.close()
		<-l.done
	})
}
