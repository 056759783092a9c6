package netstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/sbx-dev/sbx/internal/proto/netstream"
)

// wire moves Ethernet frames between a stream connection, framed as in
// package netstream, and a channel link endpoint under an ethernet
// endpoint: what is read from conn is injected into the stack (if admit
// lets it through), what the stack queues is written to conn. The same
// wire serves the sandbox's network and, in tests, the stack playing the
// guest.
type wire struct {
	conn  net.Conn
	ch    *channel.Endpoint
	admit func(frame []byte) bool // nil: every frame
	count func(n int)             // nil: not counted

	wmu sync.Mutex
	bw  *bufio.Writer
	w   *netstream.Writer // onto bw
}

// wireBuffer is the size of the wire's read and write buffers: frames
// are small, and a syscall for each would cap throughput well below what
// the stacks can do.
const wireBuffer = 256 << 10

func newWire(conn net.Conn, ch *channel.Endpoint) *wire {
	bw := bufio.NewWriterSize(conn, wireBuffer)
	return &wire{conn: conn, ch: ch, bw: bw, w: netstream.NewWriter(bw)}
}

// writeFrame writes one frame and flushes it; safe for concurrent use.
func (w *wire) writeFrame(frame []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.w.WriteFrame(frame); err != nil {
		return err
	}
	return w.bw.Flush()
}

// run moves frames both ways until conn ends or fails or ctx is done. It
// returns nil when conn ended between two frames, ctx's error when ctx is
// done, and otherwise the first failure.
func (w *wire) run(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { w.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	wdone := make(chan error, 1)
	go func() {
		err := w.send(sctx)
		if sctx.Err() == nil {
			// A write failed: stop reading too.
			w.conn.SetReadDeadline(time.Unix(1, 0))
		}
		wdone <- err
	}()
	rerr := w.receive()
	cancel()
	werr := <-wdone
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case werr != nil && !errors.Is(werr, context.Canceled):
		return werr
	case rerr == io.EOF:
		return nil
	default:
		return rerr
	}
}

// receive reads frames from conn into the stack until conn ends (io.EOF)
// or fails.
func (w *wire) receive() error {
	r := netstream.NewReader(bufio.NewReaderSize(w.conn, wireBuffer))
	for {
		frame, err := r.ReadFrame()
		if err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return fmt.Errorf("guest network: %w", err)
		}
		if w.count != nil {
			w.count(len(frame))
		}
		if w.admit != nil && !w.admit(frame) {
			continue
		}
		// MakeWithData copies the frame (into a pooled chunk), so the
		// reader may reuse its buffer.
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
			Payload: buffer.MakeWithData(frame),
		})
		w.ch.InjectInbound(0, pkt) // the ethernet endpoint reads the type
		pkt.DecRef()
	}
}

// send writes what the stack queues to conn until ctx is done or a write
// fails. It writes whatever is queued before flushing, so that a burst
// of frames costs one write.
func (w *wire) send(ctx context.Context) error {
	for {
		pkt := w.ch.ReadContext(ctx)
		if pkt == nil {
			return ctx.Err()
		}
		w.wmu.Lock()
		err := w.queue(pkt)
		for err == nil {
			if pkt = w.ch.Read(); pkt == nil {
				break
			}
			err = w.queue(pkt)
		}
		if err == nil {
			err = w.bw.Flush()
		}
		w.wmu.Unlock()
		if err != nil {
			return fmt.Errorf("guest network: %w", err)
		}
	}
}

// queue writes pkt into the write buffer and releases it; the caller
// holds wmu.
func (w *wire) queue(pkt *stack.PacketBuffer) error {
	v := pkt.ToView()
	err := w.w.WriteFrame(v.AsSlice())
	v.Release()
	pkt.DecRef()
	return err
}
