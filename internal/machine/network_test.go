package machine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// serve runs sink.Serve on one end of a socket pair in the background
// and returns QEMU's end and Serve's result. The host's end is closed
// once Serve returns, as the machine does.
func serve(t *testing.T, ctx context.Context, sink *machine.Sink) (net.Conn, <-chan error) {
	t.Helper()
	qemu, host := socketpair.New(t)
	done := make(chan error, 1)
	go func() {
		err := sink.Serve(ctx, host)
		host.Close()
		done <- err
	}()
	return qemu, done
}

func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve has not returned after 10s")
		return nil
	}
}

func TestSinkCounts(t *testing.T) {
	var sink machine.Sink
	qemu, done := serve(t, context.Background(), &sink)

	// An ARP request as the guest sends it, written by hand in QEMU's
	// framing, then frames of other sizes through netstream.Writer.
	arp := make([]byte, 42)
	copy(arp, "\xff\xff\xff\xff\xff\xff\x52\x54\x00\x12\x34\x56\x08\x06")
	stream := binary.BigEndian.AppendUint32(nil, uint32(len(arp)))
	stream = append(stream, arp...)
	if _, err := qemu.Write(stream); err != nil {
		t.Fatal(err)
	}
	w := netstream.NewWriter(qemu)
	sizes := []int{60, 1514, 0, 65549}
	want := machine.NetStats{Frames: 1, Bytes: 42}
	for _, n := range sizes {
		if err := w.WriteFrame(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		want.Frames++
		want.Bytes += uint64(n)
	}
	// The sink answers nothing: QEMU's end reads just the end once the
	// stream is over.
	qemu.(*net.UnixConn).CloseWrite()
	if err := result(t, done); err != nil {
		t.Fatalf("Serve after a clean end: %v", err)
	}
	if got := sink.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	qemu.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := qemu.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("QEMU's end read %d bytes (%v) from the sink; want nothing and the end", n, err)
	}
}

func TestSinkBrokenFraming(t *testing.T) {
	be := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	good := append(be(60), make([]byte, 60)...)
	for _, c := range []struct {
		name   string
		stream []byte
		is     error
		want   string
	}{
		{"oversized", append(append(good, be(1<<20)...), make([]byte, 4096)...), netstream.ErrFrameTooLong,
			"guest network: frame 2: length prefix 0x00100000 (1048576 bytes): frame longer than the longest QEMU sends"},
		{"truncated", append(append(good, be(1514)...), make([]byte, 10)...), io.ErrUnexpectedEOF,
			"guest network: frame 2: the stream ended after 10 of its 1514 bytes"},
		{"broken-prefix", append(good, 0, 5), io.ErrUnexpectedEOF,
			"guest network: frame 2: the stream ended 2 bytes into its 4-byte length prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sink machine.Sink
			qemu, done := serve(t, context.Background(), &sink)
			go func() {
				qemu.Write(c.stream)
				qemu.(*net.UnixConn).CloseWrite()
			}()
			err := result(t, done)
			if !errors.Is(err, c.is) || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Serve = %v, want an error saying %q", err, c.want)
			}
			if got := sink.Stats(); got != (machine.NetStats{Frames: 1, Bytes: 60}) {
				t.Errorf("Stats = %+v, want the one good frame", got)
			}
		})
	}
}

// Serve returns when its context ends, even with QEMU's end silent.
func TestSinkCancel(t *testing.T) {
	var sink machine.Sink
	ctx, cancel := context.WithCancel(context.Background())
	qemu, done := serve(t, ctx, &sink)
	w := netstream.NewWriter(qemu)
	if err := w.WriteFrame(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sink.Stats().Frames != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("Serve after cancel = %v, want context.Canceled", err)
	}
	if got := sink.Stats(); got != (machine.NetStats{Frames: 1, Bytes: 100}) {
		t.Errorf("Stats = %+v", got)
	}
}
