//go:build linux

package sandboxfs

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

type nopDevice struct{}

func (nopDevice) Handle(int, *virtq.Chain) uint32 { return 0 }

// A backend that ends on a request it refuses closes its end of the
// socket, so that the hypervisor sees a failed device: left open, the
// hypervisor's next request that waits for an answer (GET_VRING_BASE
// when the guest resets the device) would wait for good, with its
// main loop stopped. (A queue the guest lays out badly only leaves
// that queue stopped; a message the backend cannot read ends it.)
func TestDeviceBackendClosesItsSocketWhenItEnds(t *testing.T) {
	ours, f, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := net.FileConn(f) // pollable, for the deadline
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); ours.Close(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveDevice(ctx, ours, nopDevice{}, slog.New(slog.DiscardHandler))
	}()
	// SET_VRING_NUM whose header announces a payload of 64 KiB, over
	// what any message carries.
	msg := binary.LittleEndian.AppendUint32(nil, 8)
	msg = binary.LittleEndian.AppendUint32(msg, 1)
	msg = binary.LittleEndian.AppendUint32(msg, 64<<10)
	if _, err := theirs.Write(msg); err != nil {
		t.Fatal(err)
	}
	theirs.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := theirs.Read(b[:])
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("after a refused request the hypervisor's end reads %d bytes, %v; want EOF", n, err)
	}
}
