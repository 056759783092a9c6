//go:build linux

package vhostuser

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestRequests sends many requests, direct and indirect, on both queues
// and checks every reply.
func TestRequests(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	features := f.realize()
	f.start(features, true)
	const rounds = 40
	total := [2]uint16{}
	for round := range rounds {
		want := map[int][]string{}
		for i := range 2 * (1 + round%8) {
			q := i % 2
			msg := fmt.Sprintf("request %d.%d on %d", round, i, q)
			out := [][]byte{[]byte(msg[:5]), []byte(msg[5:])}
			if _, err := f.drv[q].Add(out, []uint32{3, 100}, i%3 == 0, true); err != nil {
				t.Fatal(err)
			}
			want[q] = append(want[q], msg)
		}
		for q := range 2 {
			f.kickQueue(q)
			total[q] += uint16(len(want[q]))
			f.waitUsed(q, total[q])
			done, err := f.drv[q].Completions()
			if err != nil {
				t.Fatal(err)
			}
			if len(done) != len(want[q]) {
				t.Fatalf("queue %d: %d completions, want %d", q, len(done), len(want[q]))
			}
			// Chains are handled concurrently: match by content.
			seen := map[string]bool{}
			for _, c := range done {
				seen[string(c.Data)] = true
			}
			for _, w := range want[q] {
				if !seen[string(bytes.ToUpper([]byte(w)))] {
					t.Fatalf("queue %d: no reply %q among %d", q, bytes.ToUpper([]byte(w)), len(done))
				}
			}
		}
	}
	if dev.count() != int(total[0]+total[1]) {
		t.Fatalf("device handled %d, want %d", dev.count(), total[0]+total[1])
	}
}

// TestConcurrentHandling checks that a queue hands out InFlight chains at
// once and no more.
func TestConcurrentHandling(t *testing.T) {
	const inFlight = 4
	dev := &upper{entered: make(chan int, 64), gate: make(chan struct{})}
	f := newFrontend(t, dev, Options{InFlight: inFlight})
	f.start(f.realize(), true)
	for range 10 {
		if _, err := f.drv[1].Add([][]byte{[]byte("x")}, []uint32{1}, false, true); err != nil {
			t.Fatal(err)
		}
	}
	f.kickQueue(1)
	if err := dev.waitEntered(inFlight); err != nil {
		t.Fatalf("%d handlers at once never happened: %v", inFlight, err)
	}
	// A fifth must not start while four are blocked.
	select {
	case <-dev.entered:
		t.Fatal("more than InFlight chains were handed out at once")
	case <-time.After(100 * time.Millisecond):
	}
	close(dev.gate)
	f.waitUsed(1, 10)
	dev.mu.Lock()
	most := dev.most
	dev.mu.Unlock()
	if most != inFlight {
		t.Fatalf("at most %d at once, want %d", most, inFlight)
	}
}

// TestStopWithRequestsInFlight stops a queue whose chains are being
// handled: GET_VRING_BASE answers only once they came back, the queue
// takes nothing more, and it serves again once set up anew.
func TestStopWithRequestsInFlight(t *testing.T) {
	dev := &upper{entered: make(chan int, 64), gate: make(chan struct{})}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	for range 3 {
		if _, err := f.drv[1].Add([][]byte{[]byte("abc")}, []uint32{8}, true, true); err != nil {
			t.Fatal(err)
		}
	}
	f.kickQueue(1)
	if err := dev.waitEntered(3); err != nil {
		t.Fatal(err)
	}
	f.send(reqGetVringBase, 0, state(1, 0))
	replied := make(chan []byte, 1)
	go func() { replied <- f.reply(reqGetVringBase) }()
	select {
	case <-replied:
		t.Fatal("GET_VRING_BASE answered with chains in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(dev.gate)
	var p []byte
	select {
	case p = <-replied:
	case <-time.After(waitLimit):
		t.Fatal("no reply to GET_VRING_BASE")
	}
	if s := (vringState{binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:])}); s.index != 1 || s.num != 3 {
		t.Fatalf("GET_VRING_BASE = %+v, want {1 3}", s)
	}
	if f.drv[1].UsedIdx() != 3 {
		t.Fatalf("used index %d when the queue stopped, want 3", f.drv[1].UsedIdx())
	}
	if _, err := f.drv[1].Completions(); err != nil {
		t.Fatal(err)
	}

	// Stopped: a new request and a kick are left alone.
	if _, err := f.drv[1].Add([][]byte{[]byte("later")}, []uint32{8}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	time.Sleep(100 * time.Millisecond)
	if f.drv[1].UsedIdx() != 3 || dev.count() != 3 {
		t.Fatalf("a stopped queue served: used %d, handled %d", f.drv[1].UsedIdx(), dev.count())
	}

	// Enabling alone does not restart it; a new kick descriptor does.
	f.acked(reqSetVringEnable, state(1, 1))
	f.kickQueue(1)
	time.Sleep(50 * time.Millisecond)
	if dev.count() != 3 {
		t.Fatal("a stopped queue restarted without SET_VRING_KICK")
	}
	f.startRing(1, 3)
	f.acked(reqSetVringEnable, state(1, 1))
	f.waitUsed(1, 4)
	done, err := f.drv[1].Completions()
	if err != nil || len(done) != 1 || string(done[0].Data) != "LATER" {
		t.Fatalf("after the restart: %+v, %v", done, err)
	}
}

// TestDisableAndEnable pauses a queue with SET_VRING_ENABLE 0.
func TestDisableAndEnable(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	f.acked(reqSetVringEnable, state(1, 0))
	if _, err := f.drv[1].Add([][]byte{[]byte("a")}, []uint32{1}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	time.Sleep(50 * time.Millisecond)
	if dev.count() != 0 {
		t.Fatal("a disabled queue served")
	}
	f.acked(reqSetVringEnable, state(1, 1))
	f.waitUsed(1, 1)
}

// TestWithoutProtocolFeatures: when SET_FEATURES leaves out
// VHOST_USER_F_PROTOCOL_FEATURES, rings run without SET_VRING_ENABLE.
func TestWithoutProtocolFeatures(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	features := f.realize()
	f.start(features&^FeatureProtocolFeatures, false)
	if _, err := f.drv[0].Add([][]byte{[]byte("forget")}, nil, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(0)
	f.waitUsed(0, 1)
}

// TestProtocolFeaturesRingsStartDisabled: with the bit acknowledged, a
// ring waits for SET_VRING_ENABLE.
func TestProtocolFeaturesRingsStartDisabled(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), false)
	if _, err := f.drv[1].Add([][]byte{[]byte("x")}, []uint32{1}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	time.Sleep(50 * time.Millisecond)
	if dev.count() != 0 {
		t.Fatal("a ring served before SET_VRING_ENABLE")
	}
	f.acked(reqSetVringEnable, state(1, 1))
	f.waitUsed(1, 1)
}

// TestNewMemTableWhileRunning replaces the memory table under running
// queues; they go on from where they were.
func TestNewMemTableWhileRunning(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	if _, err := f.drv[1].Add([][]byte{[]byte("one")}, []uint32{3}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 1)
	f.acked(reqSetMemTable, f.ramTable(), f.memfd)
	if _, err := f.drv[1].Add([][]byte{[]byte("two")}, []uint32{3}, true, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 2)
	done, err := f.drv[1].Completions()
	if err != nil || len(done) != 2 || string(done[1].Data) != "TWO" {
		t.Fatalf("completions %+v, %v", done, err)
	}
}

// TestCallReplacedWhileRunning swaps the call descriptor the way QEMU
// does when it unmasks a queue's notifier.
func TestCallReplacedWhileRunning(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	newCall := eventfd(t)
	f.acked(reqSetVringCall, fileIndex(1, false), newCall)
	f.call[1] = newCall
	if _, err := f.drv[1].Add([][]byte{[]byte("x")}, []uint32{1}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	if !waitFD(t, newCall) {
		t.Fatal("the new call descriptor was not signalled")
	}
	f.waitUsed(1, 1)
}

// TestNoInterrupt: with VIRTQ_AVAIL_F_NO_INTERRUPT the call descriptor
// stays quiet.
func TestNoInterrupt(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	f.drv[1].SetNoInterrupt(true)
	if _, err := f.drv[1].Add([][]byte{[]byte("x")}, []uint32{1}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 1) // polls the used index
	var b [8]byte
	if n, _ := readNonblock(f.call[1], b[:]); n == 8 {
		t.Fatal("the call descriptor was signalled under VIRTQ_AVAIL_F_NO_INTERRUPT")
	}
}

// TestConnectionEnd: Serve returns nil when the front-end hangs up, with
// queues running.
func TestConnectionEnd(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	f.conn.Close()
	if err := f.serveErr(); err != nil {
		t.Fatalf("Serve = %v after the front-end hung up", err)
	}
}

// TestStartStopStart runs QEMU's whole start and stop sequence twice,
// as a guest that resets its device does, with requests each time.
func TestStartStopStart(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	features := f.realize()
	f.start(features, true)
	if _, err := f.drv[1].Add([][]byte{[]byte("first")}, []uint32{5}, true, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 1)
	if bases := f.stop(); bases[0] != 0 || bases[1] != 1 {
		t.Fatalf("bases %v, want [0 1]", bases)
	}
	// The guest's driver resets: fresh rings from index 0.
	for i := range f.drv {
		if _, err := f.drv[i].Completions(); err != nil {
			t.Fatal(err)
		}
		f.drv[i].Resume(0)
	}
	f.start(features, true)
	if _, err := f.drv[1].Add([][]byte{[]byte("second")}, []uint32{6}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 1)
	done, err := f.drv[1].Completions()
	if err != nil || len(done) != 1 || string(done[0].Data) != "SECOND" {
		t.Fatalf("after the restart: %+v, %v", done, err)
	}
}

// TestAcceptedConnection serves a connection accepted on a listening
// socket path, the way QEMU connects with "-chardev socket,path=...".
func TestAcceptedConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vfs.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ours, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ours.Close() })
	l.SetDeadline(time.Now().Add(waitLimit))
	theirs, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { theirs.Close() })
	dev := &upper{}
	f := newFrontendOn(t, dev, Options{}, ours, theirs)
	f.start(f.realize(), true)
	if _, err := f.drv[1].Add([][]byte{[]byte("over a path")}, []uint32{11}, true, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 1)
	if done, err := f.drv[1].Completions(); err != nil || string(done[0].Data) != "OVER A PATH" {
		t.Fatalf("completions %+v, %v", done, err)
	}
}

// TestContextEnds: Serve returns the context's error when it ends while
// it waits for a request.
func TestContextEnds(t *testing.T) {
	ours, theirs := unixPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	f := &frontend{t: t, conn: ours}
	go func() { done <- Serve(ctx, theirs, &upper{}, Options{Logger: testLogger(t)}) }()
	f.getU64(reqGetFeatures)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve = %v, want context.Canceled", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return after its context ended")
	}
}
