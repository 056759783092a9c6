package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/socketpair"
)

// fakeGuest plays the guest agent's end of a router's connection, frame
// by frame, as a hostile root in the guest can over the virtio-serial
// port.
type fakeGuest struct {
	conn *agentproto.Conn
	raw  net.Conn // for writes of many frames at once, when nothing else writes
	// frames holds what the router sent, unless handle took it.
	frames chan agentproto.Frame
	// handle, when set, answers frames from the reading goroutine; it
	// returns false for the frames that go to frames instead.
	handle func(g *fakeGuest, f agentproto.Frame) bool
}

// newGuestRouter returns a router whose guest is played by the test.
func newGuestRouter(t *testing.T, handle func(g *fakeGuest, f agentproto.Frame) bool) (*Router, *fakeGuest) {
	t.Helper()
	host, guest := socketpair.New(t)
	g := &fakeGuest{conn: agentproto.NewConn(guest), raw: guest, frames: make(chan agentproto.Frame, 1<<14), handle: handle}
	go func() {
		if _, err := g.conn.ReadFrame(); err != nil {
			return
		}
		g.conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{
			Version: agentproto.Version, Software: "hostile guest",
			Capabilities: []string{agentproto.CapExec, agentproto.CapPTY, agentproto.CapSignal, agentproto.CapFile, agentproto.CapConfigure},
		})
		for {
			f, err := g.conn.ReadFrame()
			if err != nil {
				close(g.frames)
				return
			}
			if g.handle != nil && g.handle(g, f) {
				continue
			}
			select {
			case g.frames <- f:
			default: // a test that does not look at them
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := New(ctx, host, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, g
}

// await returns the next frame of type typ the router sent the guest.
func (g *fakeGuest) await(t *testing.T, typ agentproto.Type) agentproto.Frame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-g.frames:
			if !ok {
				t.Fatalf("the router closed the guest connection while the guest waited for a %s frame", typ)
			}
			if f.Type == typ {
				return f
			}
		case <-timeout:
			t.Fatalf("no %s frame reached the guest", typ)
		}
	}
}

// next returns the next frame the router sent the guest.
func (g *fakeGuest) next(t *testing.T) agentproto.Frame {
	t.Helper()
	select {
	case f, ok := <-g.frames:
		if !ok {
			t.Fatal("the router closed the guest connection")
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame reached the guest")
	}
	panic("unreachable")
}

// flood writes frame n times, in large writes, until a write fails (the
// router hung up).
func (g *fakeGuest) flood(frame []byte, n int) (sent int) {
	batch := bytes.Repeat(frame, max(1, (256<<10)/len(frame)))
	per := len(batch) / len(frame)
	for sent < n {
		k := min(per, n-sent)
		if _, err := g.raw.Write(batch[:k*len(frame)]); err != nil {
			return sent
		}
		sent += k
	}
	return sent
}

// rawClient is a client speaking frames by hand to a router, over a
// socket pair served by Router.ServeConn.
type rawClient struct {
	*agentproto.Conn
	raw net.Conn
}

func dialRouter(t *testing.T, r *Router) *rawClient {
	t.Helper()
	cl, srv := socketpair.New(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		r.ServeConn(srv)
	}()
	t.Cleanup(func() {
		cl.Close()
		select {
		case <-served:
		case <-time.After(20 * time.Second):
			t.Error("ServeConn did not return after its client closed")
		}
	})
	c := &rawClient{Conn: agentproto.NewConn(cl), raw: cl}
	before := r.Clients()
	if err := c.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: agentproto.Versions}); err != nil {
		t.Fatal(err)
	}
	cl.SetReadDeadline(time.Now().Add(10 * time.Second))
	if f, err := c.ReadFrame(); err != nil || f.Type != agentproto.TypeHello {
		t.Fatalf("the router answered the hello with %s, %v", f.Type, err)
	}
	cl.SetReadDeadline(time.Time{})
	// The router counts the client just after its hello.
	deadline := time.Now().Add(10 * time.Second)
	for r.Clients() == before {
		if time.Now().After(deadline) {
			t.Fatal("the router does not count the client after its hello")
		}
		time.Sleep(time.Millisecond)
	}
	return c
}

// readUntil reads frames until one matches or the connection ends, and
// reports whether one matched.
func (c *rawClient) readUntil(t *testing.T, match func(agentproto.Frame) bool) bool {
	t.Helper()
	c.raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer c.raw.SetReadDeadline(time.Time{})
	for {
		f, err := c.ReadFrame()
		if err != nil {
			return false
		}
		if match(f) {
			return true
		}
	}
}

// awaitDone waits for the router to end the guest connection.
func awaitDone(t *testing.T, r *Router, what string) {
	t.Helper()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the router still serves the guest after %s (a client's queue reached %d bytes)", what, r.queueHighWater())
	}
}

// awaitSessions waits until the router holds n sessions.
func awaitSessions(t *testing.T, r *Router, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := len(r.sessions)
		r.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router holds %d sessions, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustFrame(t *testing.T, typ agentproto.Type, stream uint32, payload ...[]byte) []byte {
	t.Helper()
	b, err := agentproto.AppendFrame(nil, typ, stream, payload...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSONFrame(t *testing.T, typ agentproto.Type, stream uint32, v any) []byte {
	t.Helper()
	b, err := encodeJSON(typ, stream, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGuestFloodPastCredit plays a guest that ignores flow control and
// pours stdout at a client that has stopped reading (Ctrl-Z on "sbx
// exec"): the router must end the guest connection as a protocol
// violation instead of queueing what the client never granted.
func TestGuestFloodPastCredit(t *testing.T) {
	r, g := newGuestRouter(t, nil)
	c := dialRouter(t, r)
	if err := c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"yes"}}); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing from here on.
	exec := g.await(t, agentproto.TypeExec)
	if err := g.conn.WriteJSON(agentproto.TypeStarted, exec.Stream, &agentproto.Started{Pid: 42}); err != nil {
		t.Fatal(err)
	}
	chunk := mustFrame(t, agentproto.TypeData, exec.Stream, []byte{byte(agentproto.ChanStdout)}, bytes.Repeat([]byte("y\n"), agentproto.MaxData/2))
	// 64 windows' worth, none of it granted.
	const total = 64 * agentproto.InitialWindow
	sent := g.flood(chunk, total/agentproto.MaxData)
	awaitDone(t, r, "a flood past the client's credit")
	if err := r.Err(); !errors.Is(err, ErrGuestProtocol) || !strings.Contains(err.Error(), "credit") {
		t.Errorf("router error %v, want a guest protocol error about credit", err)
	}
	high := r.queueHighWater()
	t.Logf("guest sent %d of %d frames; the client's queue reached %d bytes", sent, total/agentproto.MaxData, high)
	if limit := agentproto.InitialWindow + 16<<10; high > limit {
		t.Errorf("the router queued %d bytes for the client, more than its %d bytes of credit", high, limit)
	}
	if high == 0 {
		t.Error("the router queued nothing: the measure is broken")
	}
}

// TestGuestControlFlood plays guests that flood a session, or the
// connection, with frames that need no credit, at a client that has
// stopped reading. Each frame is either a violation, which ends the guest
// connection, or ignored; either way the client's queue stays small.
func TestGuestControlFlood(t *testing.T) {
	const n = 100_000
	small := 16 << 10
	for _, tc := range []struct {
		name string
		exec agentproto.Exec
		// frame is the frame the guest repeats, given the session's
		// guest stream id.
		frame func(t *testing.T, gid uint32) []byte
		// violation says the router must end the guest connection;
		// otherwise the frames are ignored and the session ends normally.
		violation string
	}{
		{name: "started again", violation: "started",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustJSONFrame(t, agentproto.TypeStarted, gid, &agentproto.Started{Pid: 7})
			}},
		{name: "eof again", violation: "eof",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeEOF, gid, []byte{byte(agentproto.ChanStderr)})
			}},
		{name: "file info on an exec", violation: "file-info",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustJSONFrame(t, agentproto.TypeFileInfo, gid, &agentproto.FileInfo{Size: 1})
			}},
		{name: "result on an exec", violation: "result",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustJSONFrame(t, agentproto.TypeResult, gid, &agentproto.Result{})
			}},
		{name: "unknown frame type", violation: "unknown",
			frame: func(t *testing.T, gid uint32) []byte { return mustFrame(t, agentproto.Type(0x7e), gid, []byte("x")) }},
		{name: "host frames from the guest", violation: "from the guest side",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustJSONFrame(t, agentproto.TypeExec, gid, &agentproto.Exec{Args: []string{"x"}})
			}},
		{name: "window on stdout", violation: "window",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeWindow, gid, []byte{byte(agentproto.ChanStdout), 0, 0, 0, 1})
			}},
		{name: "stdin window never earned", exec: agentproto.Exec{Stdin: true}, violation: "stdin credit",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeWindow, gid, []byte{byte(agentproto.ChanStdin), 0, 0, 0, 1})
			}},
		{name: "stderr of a terminal", exec: agentproto.Exec{PTY: &agentproto.PTY{}}, violation: "stderr",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeData, gid, []byte{byte(agentproto.ChanStderr)}, []byte("x"))
			}},
		{name: "stream never opened", violation: "not opened",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeData, gid+1000, []byte{byte(agentproto.ChanStdout)}, []byte("x"))
			}},
		{name: "oversized exits",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustJSONFrame(t, agentproto.TypeExit, gid, &agentproto.Exit{Code: -1, Error: &agentproto.Error{Message: strings.Repeat("x", 512<<10)}})
			}},
		{name: "ping from the guest", violation: "ping",
			frame: func(t *testing.T, gid uint32) []byte { return mustFrame(t, agentproto.TypePing, 0, []byte("12345678")) }},
		{name: "pong never asked for", violation: "pong",
			frame: func(t *testing.T, gid uint32) []byte { return mustFrame(t, agentproto.TypePong, 0, make([]byte, 64)) }},
		{name: "empty data",
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeData, gid, []byte{byte(agentproto.ChanStdout)})
			}},
		{name: "zero stdin windows", exec: agentproto.Exec{Stdin: true},
			frame: func(t *testing.T, gid uint32) []byte {
				return mustFrame(t, agentproto.TypeWindow, gid, []byte{byte(agentproto.ChanStdin), 0, 0, 0, 0})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, g := newGuestRouter(t, nil)
			c := dialRouter(t, r)
			req := tc.exec
			req.Args = []string{"sleep", "1000"}
			if err := c.WriteJSON(agentproto.TypeExec, 1, &req); err != nil {
				t.Fatal(err)
			}
			exec := g.await(t, agentproto.TypeExec)
			if err := g.conn.WriteJSON(agentproto.TypeStarted, exec.Stream, &agentproto.Started{Pid: 42}); err != nil {
				t.Fatal(err)
			}
			// The client reads nothing from here on.
			frame := tc.frame(t, exec.Stream)
			g.flood(frame, min(n, (64<<20)/len(frame)))
			if tc.violation != "" {
				awaitDone(t, r, "a flood of "+tc.name)
				if err := r.Err(); !errors.Is(err, ErrGuestProtocol) || !strings.Contains(err.Error(), tc.violation) {
					t.Errorf("router error %v, want a guest protocol error about %q", err, tc.violation)
				}
			} else {
				// The flood is behind the exit, which ends the session.
				if err := g.conn.WriteJSON(agentproto.TypeExit, exec.Stream, &agentproto.Exit{}); err != nil {
					t.Fatal(err)
				}
				awaitSessions(t, r, 0)
				if err := r.Err(); err != nil {
					t.Errorf("the router ended the guest connection over ignorable frames: %v", err)
				}
			}
			if high := r.queueHighWater(); high > small {
				t.Errorf("the router queued %d bytes for the client (at most %d expected)", high, small)
			}
		})
	}
}

// TestGuestTinyFramesStalledClient plays a guest that keeps within the
// client's credit but sends it one byte per frame, alternating stdout
// and stderr, while the client has stopped reading: the queue holds
// about the credit, not ten times it in framing, and once the client
// reads again every byte arrives in order and the session ends.
func TestGuestTinyFramesStalledClient(t *testing.T) {
	r, g := newGuestRouter(t, nil)
	c := dialRouter(t, r)
	if err := c.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"chatty"}}); err != nil {
		t.Fatal(err)
	}
	exec := g.await(t, agentproto.TypeExec)
	var want [3]bytes.Buffer
	var wire []byte
	wire = append(wire, mustJSONFrame(t, agentproto.TypeStarted, exec.Stream, &agentproto.Started{Pid: 42})...)
	for i := range agentproto.InitialWindow {
		for _, ch := range []agentproto.Channel{agentproto.ChanStdout, agentproto.ChanStderr} {
			b := byte('a' + (i+int(ch))%26)
			want[ch].WriteByte(b)
			wire = append(wire, mustFrame(t, agentproto.TypeData, exec.Stream, []byte{byte(ch)}, []byte{b})...)
		}
	}
	wire = append(wire, mustJSONFrame(t, agentproto.TypeExit, exec.Stream, &agentproto.Exit{Code: 3})...)
	if _, err := g.raw.Write(wire); err != nil {
		t.Fatal(err)
	}
	awaitSessions(t, r, 0)
	high := r.queueHighWater()
	t.Logf("%d bytes of frames from the guest; the client's queue reached %d bytes", len(wire), high)
	if limit := 2*agentproto.InitialWindow + 16<<10; high > limit {
		t.Errorf("the router queued %d bytes for %d bytes of credit (limit %d)", high, 2*agentproto.InitialWindow, limit)
	}
	// The client reads again.
	var got [3]bytes.Buffer
	var exit agentproto.Exit
	if !c.readUntil(t, func(f agentproto.Frame) bool {
		switch f.Type {
		case agentproto.TypeData:
			ch, data, err := agentproto.ParseData(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got[ch].Write(data)
		case agentproto.TypeExit:
			agentproto.ParseJSON(f.Type, f.Payload, &exit)
			return true
		}
		return false
	}) {
		t.Fatal("the connection ended before the exit reached the client")
	}
	for _, ch := range []agentproto.Channel{agentproto.ChanStdout, agentproto.ChanStderr} {
		if !bytes.Equal(got[ch].Bytes(), want[ch].Bytes()) {
			t.Errorf("%s: got %d bytes differing from the %d sent", ch, got[ch].Len(), want[ch].Len())
		}
	}
	if exit.Code != 3 {
		t.Errorf("exit %+v, want code 3", exit)
	}
	if err := r.Err(); err != nil {
		t.Errorf("router ended: %v", err)
	}
}

// echoGuest answers pings and runs every exec as "echo ok".
func echoGuest(g *fakeGuest, f agentproto.Frame) bool {
	switch f.Type {
	case agentproto.TypePing:
		g.conn.WriteFrame(agentproto.TypePong, 0, f.Payload)
		return true
	case agentproto.TypeExec:
		g.conn.WriteJSON(agentproto.TypeStarted, f.Stream, &agentproto.Started{Pid: 1})
		g.conn.WriteData(f.Stream, agentproto.ChanStdout, []byte("ok\n"))
		g.conn.WriteJSON(agentproto.TypeExit, f.Stream, &agentproto.Exit{})
		return true
	}
	return false
}

// execOK runs an exec through a raw client and checks its output.
func execOK(t *testing.T, c *rawClient, stream uint32) {
	t.Helper()
	if err := c.WriteJSON(agentproto.TypeExec, stream, &agentproto.Exec{Args: []string{"echo", "ok"}}); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if !c.readUntil(t, func(f agentproto.Frame) bool {
		if f.Stream != stream {
			return false
		}
		if f.Type == agentproto.TypeData {
			_, data, _ := agentproto.ParseData(f.Payload)
			out = append(out, data...)
		}
		return f.Type == agentproto.TypeExit
	}) || string(out) != "ok\n" {
		t.Fatalf("exec on stream %d: output %q and no exit", stream, out)
	}
}

// TestClientPingsWithoutReading plays a client that keeps asking (pings)
// and never reads the answers: the router drops it once its queue passes
// its bound, and serves another client meanwhile.
func TestClientPingsWithoutReading(t *testing.T) {
	var answered atomic.Int64
	r, _ := newGuestRouter(t, func(g *fakeGuest, f agentproto.Frame) bool {
		ok := echoGuest(g, f)
		if f.Type == agentproto.TypePing {
			answered.Add(1)
		}
		return ok
	})
	other := dialRouter(t, r)
	greedy := dialRouter(t, r)

	ping := mustFrame(t, agentproto.TypePing, 0, make([]byte, agentproto.MaxPing))
	batch := bytes.Repeat(ping, maxPendingPings)
	// Rounds of as many pings as the router keeps, each answered before
	// the next: every pong costs the queue about 140 bytes, so 2,000
	// rounds would come to 18 MB.
	var dropped bool
	for round := 0; round < 2000 && !dropped; round++ {
		greedy.raw.Write(batch) // fails once the router has hung up
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.mu.Lock()
			pending := len(r.pings)
			r.mu.Unlock()
			if dropped = r.Clients() == 1; dropped || pending == 0 && answered.Load() == int64((round+1)*maxPendingPings) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the guest's pongs did not reach the router", round)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	if dropped {
		// The router closed the connection: what it wrote is followed by
		// the end.
		greedy.raw.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, greedy.raw)
		if err != nil {
			t.Errorf("reading what the router wrote before dropping the client: %v", err)
		}
	} else {
		t.Error("the router kept a client that does not read its pongs")
	}
	high := r.queueHighWater()
	t.Logf("the greedy client's queue reached %d bytes", high)
	if high > queueBase {
		t.Errorf("the router queued %d bytes for a client (bound %d)", high, queueBase)
	}
	for i := range 3 {
		execOK(t, other, uint32(i+1))
	}
	if r.Clients() != 1 {
		t.Errorf("router counts %d clients, want the one left", r.Clients())
	}
	if err := r.Err(); err != nil {
		t.Errorf("router ended: %v", err)
	}
}

// TestPendingPingsBounded plays a guest that never answers pings while a
// client sends many: the router remembers a bounded number per client.
func TestPendingPingsBounded(t *testing.T) {
	r, g := newGuestRouter(t, nil)
	c := dialRouter(t, r)
	const n = 5000
	var wire []byte
	for i := range n {
		var p [8]byte
		binary.BigEndian.PutUint64(p[:], uint64(i))
		wire = append(wire, mustFrame(t, agentproto.TypePing, 0, p[:])...)
	}
	if _, err := c.raw.Write(wire); err != nil {
		t.Fatal(err)
	}
	var last agentproto.Frame
	for range n {
		last = g.await(t, agentproto.TypePing)
	}
	r.mu.Lock()
	pending := len(r.pings)
	r.mu.Unlock()
	if pending > maxPendingPings {
		t.Errorf("the router remembers %d unanswered pings of one client (at most %d)", pending, maxPendingPings)
	}
	// The latest ping is still answered.
	if err := g.conn.WriteFrame(agentproto.TypePong, 0, last.Payload); err != nil {
		t.Fatal(err)
	}
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], n-1)
	if !c.readUntil(t, func(f agentproto.Frame) bool { return f.Type == agentproto.TypePong && bytes.Equal(f.Payload, p[:]) }) {
		t.Error("the last ping's pong did not reach the client")
	}
}

// TestStalledClientBesideOthers stops reading on one client while a guest
// within credit keeps its session busy, and checks that other clients
// are served and the stalled one is not dropped: it holds its credit's
// worth and no more.
func TestStalledClientBesideOthers(t *testing.T) {
	var mu sync.Mutex
	var busy uint32
	r, g := newGuestRouter(t, func(g *fakeGuest, f agentproto.Frame) bool {
		if f.Type == agentproto.TypeExec {
			var e agentproto.Exec
			agentproto.ParseJSON(f.Type, f.Payload, &e)
			if e.Args[0] == "yes" {
				mu.Lock()
				busy = f.Stream
				mu.Unlock()
				return false
			}
		}
		return echoGuest(g, f)
	})
	stalled := dialRouter(t, r)
	other := dialRouter(t, r)
	if err := stalled.WriteJSON(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"yes"}}); err != nil {
		t.Fatal(err)
	}
	g.await(t, agentproto.TypeExec)
	mu.Lock()
	gid := busy
	mu.Unlock()
	// All the credit on both channels, in 8-byte frames; frame by
	// frame, since the guest answers the other client meanwhile.
	chunk := bytes.Repeat([]byte{'y'}, 8)
	for range agentproto.InitialWindow / len(chunk) {
		for _, ch := range []agentproto.Channel{agentproto.ChanStdout, agentproto.ChanStderr} {
			if err := g.conn.WriteData(gid, ch, chunk); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 5 {
		execOK(t, other, uint32(i+1))
	}
	if r.Clients() != 2 {
		t.Errorf("router counts %d clients, want both", r.Clients())
	}
	if high := r.queueHighWater(); high > 2*agentproto.InitialWindow+16<<10 {
		t.Errorf("the router queued %d bytes for %d bytes of credit", high, 2*agentproto.InitialWindow)
	}
	if err := r.Err(); err != nil {
		t.Errorf("router ended: %v", err)
	}
}

// TestGuestControlCutDown checks that a control payload over
// maxGuestControl bytes, which a client can cause with a long path in a
// request that fails, is passed on cut down to the bound with the fields
// this version knows, whatever JSON escaping does to its strings.
func TestGuestControlCutDown(t *testing.T) {
	// 800 KiB once escaped.
	long := strings.Repeat("\x01é", 100<<10)
	for _, tc := range []struct {
		typ agentproto.Type
		v   any
	}{
		{agentproto.TypeExit, &agentproto.Exit{Code: -1, Signal: strings.Repeat("S", 4096), Error: &agentproto.Error{Code: strings.Repeat("E", 4096), Message: "exec /" + long + ": ENAMETOOLONG"}}},
		{agentproto.TypeResult, &agentproto.Result{Error: &agentproto.Error{Code: "ENAMETOOLONG", Message: "open /" + long}}},
		{agentproto.TypeError, &agentproto.Error{Code: agentproto.CodeProtocol, Message: long}},
		{agentproto.TypeStarted, &struct {
			Pid   int    `json:"pid"`
			Extra string `json:"extra"`
		}{Pid: 7, Extra: long}},
	} {
		b := mustJSONFrame(t, tc.typ, 1, tc.v)
		f, err := agentproto.ReadFrame(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var into any
		switch tc.typ {
		case agentproto.TypeExit:
			into = &agentproto.Exit{}
		case agentproto.TypeResult:
			into = &agentproto.Result{}
		case agentproto.TypeError:
			into = &agentproto.Error{}
		case agentproto.TypeStarted:
			into = &agentproto.Started{}
		}
		p, err := guestControl(f, into)
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		if len(p) > maxGuestControl {
			t.Errorf("%s of %d bytes passed on as %d bytes (at most %d)", tc.typ, len(f.Payload), len(p), maxGuestControl)
		}
		if err := agentproto.ParseJSON(tc.typ, p, into); err != nil {
			t.Errorf("%s passed on malformed: %v", tc.typ, err)
		}
		switch m := into.(type) {
		case *agentproto.Exit:
			if m.Code != -1 || !strings.HasPrefix(m.Error.Message, "exec /\x01é") || !strings.HasSuffix(m.Error.Message, "…") {
				t.Errorf("exit cut down to %+v", m)
			}
		case *agentproto.Started:
			if m.Pid != 7 {
				t.Errorf("started cut down to %+v", m)
			}
		}
	}
}

// TestClientOutOfOrder: a client whose frames break the session's
// grammar (agentproto.Session) is refused with the grammar's words, the
// same the guest server uses, and disconnected; the frame never reaches
// the guest, whose connection carries on.
func TestClientOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exec    agentproto.Exec
		frame   func(c *rawClient)
		refusal string
		never   agentproto.Type // the type of the frame that breaks the order
	}{
		{"stdin nobody asked for", agentproto.Exec{},
			func(c *rawClient) { c.WriteEOF(1, agentproto.ChanStdin) },
			"stream 1: eof on stdin, where the session takes no data", agentproto.TypeEOF},
		{"stdin after its eof", agentproto.Exec{Stdin: true},
			func(c *rawClient) {
				c.WriteEOF(1, agentproto.ChanStdin)
				c.WriteData(1, agentproto.ChanStdin, []byte("x"))
			},
			"stream 1: data on stdin after its eof", agentproto.TypeData},
		{"stderr window on a terminal", agentproto.Exec{PTY: &agentproto.PTY{}},
			func(c *rawClient) { c.WriteWindow(1, agentproto.ChanStderr, 1) },
			"stream 1: window on stderr, where the session sends nothing", agentproto.TypeWindow},
		{"a frame only the guest sends", agentproto.Exec{},
			func(c *rawClient) { c.WriteJSON(agentproto.TypeExit, 1, &agentproto.Exit{}) },
			"stream 1: exit frame from the host side", agentproto.TypeExit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, g := newGuestRouter(t, nil)
			c := dialRouter(t, r)
			req := tc.exec
			req.Args = []string{"sleep", "1000"}
			if err := c.WriteJSON(agentproto.TypeExec, 1, &req); err != nil {
				t.Fatal(err)
			}
			exec := g.await(t, agentproto.TypeExec)
			tc.frame(c)
			var e agentproto.Error
			if !c.readUntil(t, func(f agentproto.Frame) bool {
				return f.Type == agentproto.TypeError && agentproto.ParseJSON(f.Type, f.Payload, &e) == nil
			}) {
				t.Fatal("the router hung up without saying why")
			}
			if e.Code != agentproto.CodeProtocol || e.Message != tc.refusal {
				t.Errorf("refused with %+v; want %q", e, tc.refusal)
			}
			// The guest sees the session cancelled, and the frame that
			// broke the order never.
			for {
				f := g.next(t)
				if f.Type == tc.never {
					t.Fatalf("the router passed the guest the %s frame that broke the order", f.Type)
				}
				if f.Type == agentproto.TypeCancel && f.Stream == exec.Stream {
					break
				}
			}
			if err := r.Err(); err != nil {
				t.Errorf("the guest connection ended: %v", err)
			}
		})
	}
}
