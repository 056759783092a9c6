package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/socketpair"
)

// FuzzRouter feeds a router arbitrary bytes from a client and then from
// the guest, each after a hello the harness says, over socket pairs; the
// client reads everything or, with stall, nothing. The harness checks
// that the router neither panics nor hangs (every wait is bounded), that
// it queues no more for the client than its bound, that it remembers a
// bounded number of pings, and that what it passes on keeps the
// protocol: the guest gets no more stdin than the credit it granted and
// no more credit than the data it sent, and the client gets no more
// output than the credit it granted, only on streams it opened.
func FuzzRouter(f *testing.F) {
	for _, s := range routerSeeds(f) {
		f.Add(s.client, s.guest, s.stall)
	}
	f.Fuzz(func(t *testing.T, client, guest []byte, stall bool) {
		runRouterScript(t, client, guest, stall)
	})
}

type routerSeed struct {
	client, guest []byte
	stall         bool
}

// script builds a byte stream of frames.
type script struct {
	tb testing.TB
	b  []byte
}

func (s *script) frame(t agentproto.Type, stream uint32, payload ...[]byte) *script {
	b, err := agentproto.AppendFrame(s.b, t, stream, payload...)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.b = b
	return s
}

func (s *script) json(t agentproto.Type, stream uint32, v any) *script {
	b, err := encodeJSON(t, stream, v)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.b = append(s.b, b...)
	return s
}

func (s *script) data(stream uint32, ch agentproto.Channel, data string) *script {
	return s.frame(agentproto.TypeData, stream, []byte{byte(ch)}, []byte(data))
}

func (s *script) window(stream uint32, ch agentproto.Channel, n uint32) *script {
	return s.frame(agentproto.TypeWindow, stream, []byte{byte(ch)}, binary.BigEndian.AppendUint32(nil, n))
}

// routerSeeds are valid sessions (the guest's stream ids are the
// router's, 1 for the first session opened) and a few hostile ones.
func routerSeeds(tb testing.TB) []routerSeed {
	n := func() *script { return &script{tb: tb} }
	ping1 := binary.BigEndian.AppendUint64(nil, 1)
	big := string(bytes.Repeat([]byte("y"), agentproto.MaxData))
	return []routerSeed{
		{ // an exec with stdin, stdout and stderr
			client: n().json(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"cat"}, Stdin: true}).
				data(1, agentproto.ChanStdin, "hello\n").frame(agentproto.TypeEOF, 1, []byte{0}).b,
			guest: n().json(agentproto.TypeStarted, 1, &agentproto.Started{Pid: 9}).window(1, agentproto.ChanStdin, 6).
				data(1, agentproto.ChanStdout, "hello\n").data(1, agentproto.ChanStderr, "warn\n").
				json(agentproto.TypeExit, 1, &agentproto.Exit{Code: 0}).b,
		},
		{ // a terminal, resized and signalled
			client: n().json(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"sh"}, PTY: &agentproto.PTY{Rows: 24, Cols: 80}}).
				json(agentproto.TypeResize, 1, &agentproto.Resize{Rows: 50, Cols: 100}).
				json(agentproto.TypeSignal, 1, &agentproto.Signal{Signal: "SIGINT"}).frame(agentproto.TypeCancel, 1).b,
			guest: n().json(agentproto.TypeStarted, 1, &agentproto.Started{Pid: 9}).data(1, agentproto.ChanStdout, "$ ").
				json(agentproto.TypeExit, 1, &agentproto.Exit{Code: -1, Signal: "SIGKILL"}).b,
			stall: true,
		},
		{ // a file put and a file get
			client: n().json(agentproto.TypeFilePut, 1, &agentproto.FilePut{Path: "/f", Mode: 0o644}).
				data(1, agentproto.ChanStdin, "content").frame(agentproto.TypeEOF, 1, []byte{0}).
				json(agentproto.TypeFileGet, 2, &agentproto.FileGet{Path: "/f"}).b,
			guest: n().window(1, agentproto.ChanStdin, 7).json(agentproto.TypeResult, 1, &agentproto.Result{}).
				json(agentproto.TypeFileInfo, 2, &agentproto.FileInfo{Size: 7, Mode: 0o644}).
				data(2, agentproto.ChanStdout, "content").json(agentproto.TypeResult, 2, &agentproto.Result{}).b,
		},
		{ // pings, one answered
			client: n().frame(agentproto.TypePing, 0, []byte("a")).frame(agentproto.TypePing, 0, []byte("b")).b,
			guest:  n().frame(agentproto.TypePong, 0, ping1).b,
		},
		{ // output past the client's credit, to a client that stopped reading
			client: n().json(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"yes"}}).b,
			guest: n().data(1, agentproto.ChanStdout, big).data(1, agentproto.ChanStdout, big).
				data(1, agentproto.ChanStdout, big).data(1, agentproto.ChanStdout, big).data(1, agentproto.ChanStdout, "!").b,
			stall: true,
		},
		{ // a failed exec and a guest error
			client: n().json(agentproto.TypeExec, 1, &agentproto.Exec{Args: []string{"nope"}}).b,
			guest: n().json(agentproto.TypeExit, 1, &agentproto.Exit{Code: -1, Error: &agentproto.Error{Code: "ENOENT", Message: "no nope"}}).
				json(agentproto.TypeError, 0, &agentproto.Error{Code: agentproto.CodeProtocol, Message: "bye"}).b,
		},
		{ // a client breaking the protocol
			client: n().window(1, agentproto.ChanStdout, 1).frame(agentproto.TypeExec, 1, []byte("{")).b,
			guest:  n().data(1, agentproto.ChanStdout, "x").b,
		},
	}
}

// fuzzWait bounds every wait of the harness: a router that takes longer
// is taken to hang.
const fuzzWait = 10 * time.Second

// checkingGuest is the guest's end: it says hello, then reads what the
// router sends and checks it against what the guest granted and sent.
type checkingGuest struct {
	conn *agentproto.Conn

	mu         sync.Mutex
	opened     map[uint32]bool
	last       uint32 // the highest stream id opened
	stdinGot   map[uint32]int64
	stdinGrant map[uint32]int64
	outSent    map[[2]uint32]int64 // by stream and channel
	outGrant   map[[2]uint32]int64
	pings      int
	lastPing   []byte
}

// account records the frames the guest is about to send.
func (g *checkingGuest) account(frames []agentproto.Frame) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range frames {
		switch f.Type {
		case agentproto.TypeWindow:
			if ch, n, err := agentproto.ParseWindow(f.Payload); err == nil && ch == agentproto.ChanStdin {
				g.stdinGrant[f.Stream] += int64(n)
			}
		case agentproto.TypeData:
			if ch, data, err := agentproto.ParseData(f.Payload); err == nil {
				g.outSent[[2]uint32{f.Stream, uint32(ch)}] += int64(len(data))
			}
		}
	}
}

func (g *checkingGuest) check(f agentproto.Frame) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.Stream == 0 {
		if f.Type != agentproto.TypePing || len(f.Payload) != 8 {
			return fmt.Errorf("%s frame of %d bytes on stream 0", f.Type, len(f.Payload))
		}
		g.pings++
		g.lastPing = f.Payload
		return nil
	}
	switch f.Type {
	case agentproto.TypeExec, agentproto.TypeFilePut, agentproto.TypeFileGet:
		if f.Stream <= g.last {
			return fmt.Errorf("%s on stream %d, after stream %d was opened", f.Type, f.Stream, g.last)
		}
		g.opened[f.Stream], g.last = true, f.Stream
		return nil
	}
	if !g.opened[f.Stream] {
		return fmt.Errorf("%s frame on stream %d, never opened", f.Type, f.Stream)
	}
	switch f.Type {
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil || ch != agentproto.ChanStdin {
			return fmt.Errorf("data frame on stream %d: channel %v, %v", f.Stream, ch, err)
		}
		g.stdinGot[f.Stream] += int64(len(data))
		if got, credit := g.stdinGot[f.Stream], agentproto.InitialWindow+g.stdinGrant[f.Stream]; got > credit {
			return fmt.Errorf("stream %d: %d bytes of stdin for %d bytes of credit", f.Stream, got, credit)
		}
	case agentproto.TypeWindow:
		ch, n, err := agentproto.ParseWindow(f.Payload)
		if err != nil || ch == agentproto.ChanStdin {
			return fmt.Errorf("window frame on stream %d: channel %v, %v", f.Stream, ch, err)
		}
		k := [2]uint32{f.Stream, uint32(ch)}
		g.outGrant[k] += int64(n)
		if g.outGrant[k] > g.outSent[k] {
			return fmt.Errorf("stream %d: %d bytes of %s credit returned for %d bytes sent", f.Stream, g.outGrant[k], ch, g.outSent[k])
		}
	case agentproto.TypeEOF:
		if ch, err := agentproto.ParseEOF(f.Payload); err != nil || ch != agentproto.ChanStdin {
			return fmt.Errorf("eof frame on stream %d: channel %v, %v", f.Stream, ch, err)
		}
	case agentproto.TypeSignal, agentproto.TypeResize, agentproto.TypeCancel:
	default:
		return fmt.Errorf("%s frame on stream %d", f.Type, f.Stream)
	}
	return nil
}

func (g *checkingGuest) synced(pings int) ([]byte, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastPing, g.pings > pings
}

// splitFrames decodes b; whole says it is nothing but frames.
func splitFrames(b []byte) (frames []agentproto.Frame, whole bool) {
	rd := bytes.NewReader(b)
	for rd.Len() > 0 {
		f, err := agentproto.ReadFrame(rd)
		if err != nil {
			return frames, false
		}
		frames = append(frames, f)
	}
	return frames, true
}

// writeBounded writes b to w, failing the test when the write blocks
// past fuzzWait (the router stopped reading). A failed write is fine:
// the router may hang up.
func writeBounded(t *testing.T, w net.Conn, b []byte, who string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Write(b)
	}()
	select {
	case <-done:
	case <-time.After(fuzzWait):
		w.Close()
		<-done
		t.Fatalf("the router stopped reading the %s's %d bytes", who, len(b))
	}
}

// waitFor polls cond until it holds or fuzzWait passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(fuzzWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("the router hangs: %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func runRouterScript(t *testing.T, client, guest []byte, stall bool) {
	hostEnd, guestEnd := socketpair.New(t)
	g := &checkingGuest{
		conn: agentproto.NewConn(guestEnd), opened: map[uint32]bool{},
		stdinGot: map[uint32]int64{}, stdinGrant: map[uint32]int64{},
		outSent: map[[2]uint32]int64{}, outGrant: map[[2]uint32]int64{},
	}
	guestDone := make(chan struct{})
	go func() {
		defer close(guestDone)
		if _, err := g.conn.ReadFrame(); err != nil {
			return
		}
		g.conn.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Version: agentproto.Version, Software: "fuzz",
			Capabilities: []string{agentproto.CapExec, agentproto.CapPTY, agentproto.CapSignal, agentproto.CapFile}})
		for {
			f, err := g.conn.ReadFrame()
			if err != nil {
				return
			}
			if err := g.check(f); err != nil {
				t.Errorf("the router sent the guest: %v", err)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), fuzzWait)
	r, err := New(ctx, hostEnd, Options{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r.Close()
		select {
		case <-guestDone:
		case <-time.After(fuzzWait):
			t.Error("the guest connection stayed open after Close")
		}
	}()

	cl, srv := socketpair.New(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		r.ServeConn(srv)
	}()
	defer func() {
		r.Close()
		cl.Close()
		select {
		case <-served:
		case <-time.After(fuzzWait):
			t.Error("ServeConn did not return after the client closed")
		}
	}()
	cc := agentproto.NewConn(cl)
	cl.SetDeadline(time.Now().Add(fuzzWait))
	if err := cc.WriteJSON(agentproto.TypeHello, 0, &agentproto.Hello{Versions: agentproto.Versions}); err != nil {
		t.Fatal(err)
	}
	if f, err := cc.ReadFrame(); err != nil || f.Type != agentproto.TypeHello {
		t.Fatalf("the router answered the hello with %s, %v", f.Type, err)
	}
	cl.SetDeadline(time.Time{})
	waitFor(t, "the client is not counted after its hello", func() bool { return r.Clients() == 1 })

	cframes, cwhole := splitFrames(client)
	pings, sessions := 0, 0
	opened := map[uint32]bool{}
	granted := map[[2]uint32]int64{}
	for _, f := range cframes {
		switch {
		case f.Type == agentproto.TypePing && f.Stream == 0:
			pings++
		case f.Type == agentproto.TypeExec || f.Type == agentproto.TypeFilePut || f.Type == agentproto.TypeFileGet:
			sessions++
			opened[f.Stream] = true
		case f.Type == agentproto.TypeWindow:
			if ch, n, err := agentproto.ParseWindow(f.Payload); err == nil {
				granted[[2]uint32{f.Stream, uint32(ch)}] += int64(n)
			}
		}
	}
	readerDone := make(chan struct{})
	defer func() {
		cl.Close()
		select {
		case <-readerDone:
		case <-time.After(fuzzWait):
			t.Error("the client's connection stayed open after Close")
		}
	}()
	if stall {
		close(readerDone)
	} else {
		go func() {
			defer close(readerDone)
			got := map[[2]uint32]int64{}
			for {
				f, err := cc.ReadFrame()
				if err != nil {
					return
				}
				if err := checkClientFrame(f, opened, granted, got); err != nil {
					t.Errorf("the router sent the client: %v", err)
				}
			}
		}()
	}

	// The client's bytes, then a ping whose arrival at the guest says
	// the router has routed them.
	wire := bytes.Clone(client)
	if cwhole {
		wire, _ = agentproto.AppendFrame(wire, agentproto.TypePing, 0, []byte("sync"))
	}
	writeBounded(t, cl, wire, "client")
	if !cwhole {
		cl.(*net.UnixConn).CloseWrite() // the router sees the frame cut short
	}
	var seq []byte
	waitFor(t, "the client's frames never reach the guest", func() bool {
		var ok bool
		seq, ok = g.synced(pings)
		if ok {
			return true
		}
		seq = nil
		select {
		case <-r.Done():
			return true
		default:
		}
		return r.Clients() == 0
	})

	// The guest's bytes, then the pong for that ping, whose routing says
	// the router has read them.
	gframes, gwhole := splitFrames(guest)
	g.account(gframes)
	wire = bytes.Clone(guest)
	if gwhole && seq != nil {
		wire, _ = agentproto.AppendFrame(wire, agentproto.TypePong, 0, seq)
	}
	writeBounded(t, guestEnd, wire, "guest")
	if !gwhole {
		guestEnd.(*net.UnixConn).CloseWrite()
	}
	if gwhole && seq != nil {
		n := binary.BigEndian.Uint64(seq)
		waitFor(t, "the guest's frames are not routed", func() bool {
			select {
			case <-r.Done():
				return true
			default:
			}
			r.mu.Lock()
			_, waiting := r.pings[n]
			r.mu.Unlock()
			return !waiting
		})
	} else if !gwhole {
		select {
		case <-r.Done():
		case <-time.After(fuzzWait):
			t.Fatal("the router ignores a guest frame cut short")
		}
	}

	if high, bound := r.queueHighWater(), queueBase+sessions*queueSession; high > bound {
		t.Errorf("the router queued %d bytes for a client that opened %d sessions (bound %d)", high, sessions, bound)
	}
	r.mu.Lock()
	pending := len(r.pings)
	r.mu.Unlock()
	if pending > maxPendingPings {
		t.Errorf("the router remembers %d pings of one client (at most %d)", pending, maxPendingPings)
	}
}

// checkClientFrame checks a frame the client got against the streams it
// opened and the credit it granted.
func checkClientFrame(f agentproto.Frame, opened map[uint32]bool, granted, got map[[2]uint32]int64) error {
	if f.Stream == 0 {
		if f.Type != agentproto.TypePong && f.Type != agentproto.TypeError {
			return fmt.Errorf("%s frame on stream 0", f.Type)
		}
		return nil
	}
	if !opened[f.Stream] {
		return fmt.Errorf("%s frame on stream %d, never opened", f.Type, f.Stream)
	}
	switch f.Type {
	case agentproto.TypeData:
		ch, data, err := agentproto.ParseData(f.Payload)
		if err != nil || ch == agentproto.ChanStdin {
			return fmt.Errorf("data frame on stream %d: channel %v, %v", f.Stream, ch, err)
		}
		k := [2]uint32{f.Stream, uint32(ch)}
		got[k] += int64(len(data))
		if credit := agentproto.InitialWindow + granted[k]; got[k] > credit {
			return fmt.Errorf("stream %d: %d bytes of %s for %d bytes of credit", f.Stream, got[k], ch, credit)
		}
	case agentproto.TypeStarted, agentproto.TypeExit, agentproto.TypeEOF, agentproto.TypeWindow,
		agentproto.TypeFileInfo, agentproto.TypeResult:
	default:
		return fmt.Errorf("%s frame on stream %d", f.Type, f.Stream)
	}
	return nil
}
