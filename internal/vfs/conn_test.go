//go:build linux

package vfs

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/socketpair"
)

// raw is a hostile guest's end of a connection: hand-built 9P messages.
type raw struct {
	t    *testing.T
	conn net.Conn
}

func (r *raw) send(typ uint8, tag uint16, body ...[]byte) {
	r.t.Helper()
	size := headerLen
	for _, b := range body {
		size += len(b)
	}
	msg := make([]byte, headerLen, size)
	binary.LittleEndian.PutUint32(msg[0:4], uint32(size))
	msg[4] = typ
	binary.LittleEndian.PutUint16(msg[5:7], tag)
	for _, b := range body {
		msg = append(msg, b...)
	}
	if _, err := r.conn.Write(msg); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

// recv reads one reply within 5 seconds.
func (r *raw) recv() (typ uint8, tag uint16, body []byte, err error) {
	r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r.conn, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	size := binary.LittleEndian.Uint32(hdr[0:4])
	if size < headerLen || size > 8<<20 {
		return 0, 0, nil, errors.New("bad reply size")
	}
	body = make([]byte, size-headerLen)
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return 0, 0, nil, err
	}
	return hdr[4], binary.LittleEndian.Uint16(hdr[5:7]), body, nil
}

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func str(s string) []byte { return append(u16(uint16(len(s))), s...) }

const (
	tVersion = 100
	rVersion = 101
	tAttach  = 104
	tWalk    = 110
	rWalk    = 111
	tLopen   = 12
	tRead    = 116
	rRead    = 117
	tClunk   = 120
)

// gatedConn is the server's end of a connection whose writes (the
// server's replies) block while the gate is shut.
type gatedConn struct {
	net.Conn
	mu   sync.Mutex
	shut chan struct{}
}

func (g *gatedConn) close(b bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b && g.shut == nil {
		g.shut = make(chan struct{})
	}
	if !b && g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	ch := g.shut
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return g.Conn.Write(p)
}

// rawServe serves the workspace on a socket pair and returns the
// guest's raw end, the server's end and the Serve result.
func rawServe(t *testing.T, work string, lim Limits) (*Server, *raw, *gatedConn, chan error) {
	t.Helper()
	s, err := New(workspace(), Options{HostDir: work, UID: 1000, GID: 1000, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	host, guest := socketpair.New(t)
	g := &gatedConn{Conn: host}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, g) }()
	t.Cleanup(func() {
		g.close(false)
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return")
		}
		s.Close()
	})
	return s, &raw{t: t, conn: guest}, g, done
}

// hello negotiates msize and attaches fid 1 to the root.
func (r *raw) hello(msize uint32) uint32 {
	r.t.Helper()
	r.send(tVersion, 0xFFFF, u32(msize), str("9P2000.L"))
	typ, _, body, err := r.recv()
	if err != nil || typ != rVersion {
		r.t.Fatalf("version: type %d, %v", typ, err)
	}
	got := binary.LittleEndian.Uint32(body)
	r.send(tAttach, 1, u32(1), u32(^uint32(0)), str("agent"), str(""), u32(1000))
	if typ, _, body, err := r.recv(); err != nil || typ != 105 {
		r.t.Fatalf("attach: type %d %x, %v", typ, body, err)
	}
	return got
}

func TestMsizeIsLowered(t *testing.T) {
	_, work := tree(t)
	_, r, _, _ := rawServe(t, work, Limits{Msize: 16 << 10})
	if got := r.hello(4 << 20); got != 16<<10 {
		t.Errorf("asked for 4 MiB, got msize %d; want 16 KiB", got)
	}
}

func TestOversizedMessageEndsConnection(t *testing.T) {
	_, work := tree(t)
	_, r, _, done := rawServe(t, work, Limits{Msize: 16 << 10})
	r.hello(16 << 10)
	r.send(tWalk, 2, u32(1), u32(2), u16(1), str(strings.Repeat("a", 20<<10)))
	select {
	case err := <-done:
		done <- err // for the clean-up
		if err == nil || !strings.Contains(err.Error(), "at most") {
			t.Errorf("Serve = %v; want an error about the message size", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server kept serving after an oversized message")
	}
	if _, _, _, err := r.recv(); err == nil {
		t.Errorf("the connection still answers")
	}
}

func TestReadCountIsLowered(t *testing.T) {
	_, work := tree(t)
	big := make([]byte, 256<<10)
	if err := os.WriteFile(filepath.Join(work, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	_, r, _, _ := rawServe(t, work, Limits{Msize: 16 << 10})
	r.hello(16 << 10)
	r.send(tWalk, 2, u32(1), u32(2), u16(1), str("big"))
	if typ, _, body, err := r.recv(); err != nil || typ != rWalk {
		t.Fatalf("walk: %d %x %v", typ, body, err)
	}
	r.send(tLopen, 3, u32(2), u32(0))
	if typ, _, body, err := r.recv(); err != nil || typ != 13 {
		t.Fatalf("lopen: %d %x %v", typ, body, err)
	}
	r.send(tRead, 4, u32(2), u64(0), u32(4<<20))
	typ, _, body, err := r.recv()
	if err != nil || typ != rRead {
		t.Fatalf("read: %d %v", typ, err)
	}
	if n := binary.LittleEndian.Uint32(body); n > 16<<10-11 || len(body)+headerLen > 16<<10 {
		t.Errorf("a read of 4 MiB returned %d bytes in a %d-byte reply; the msize is 16 KiB", n, len(body)+headerLen)
	}
}

func TestXattrsAnsweredByFraming(t *testing.T) {
	_, work := tree(t)
	_, r, _, _ := rawServe(t, work, Limits{})
	r.hello(64 << 10)
	// Txattrcreate declaring 2^60 bytes, then writes to fill it.
	r.send(msgTxattrcreate, 5, u32(1), str("user.big"), u64(1<<60), u32(0))
	typ, tag, body, err := r.recv()
	if err != nil || typ != msgRlerror || tag != 5 || unix.Errno(binary.LittleEndian.Uint32(body)) != unix.EOPNOTSUPP {
		t.Errorf("xattrcreate: type %d tag %d %x %v; want Rlerror EOPNOTSUPP", typ, tag, body, err)
	}
	r.send(msgTxattrwalk, 6, u32(1), u32(7), str("security.capability"))
	typ, _, body, err = r.recv()
	if err != nil || typ != msgRlerror || unix.Errno(binary.LittleEndian.Uint32(body)) != unix.ENODATA {
		t.Errorf("xattrwalk: type %d %x %v; want Rlerror ENODATA", typ, body, err)
	}
	// The fid xattrwalk names was never made.
	r.send(tWalk, 8, u32(7), u32(9), u16(0))
	typ, _, body, err = r.recv()
	if err != nil || typ != msgRlerror {
		t.Errorf("walk from the xattr fid: type %d %x %v; want an error", typ, body, err)
	}
}

// With replies held back, the server reads no more than Requests
// requests: each walk that gets through makes a file, so the count of
// files shows how many did.
func TestRequestsInFlightAreBounded(t *testing.T) {
	_, work := tree(t)
	s, r, g, _ := rawServe(t, work, Limits{Requests: 4})
	r.hello(64 << 10)
	base := s.fs.files.Load()
	g.close(true)
	for i := 0; i < 40; i++ {
		r.send(tWalk, uint16(100+i), u32(1), u32(uint32(100+i)), u16(0))
	}
	time.Sleep(300 * time.Millisecond)
	if got := s.fs.files.Load() - base; got > 4 {
		t.Errorf("%d walks were handled with their replies held back; at most 4 may be in flight", got)
	}
	g.close(false)
	for i := 0; i < 40; i++ {
		if _, _, _, err := r.recv(); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
	}
}

func TestFilesAreBounded(t *testing.T) {
	_, work := tree(t)
	_, root := client(t, workspace(), work, Limits{Files: 10})
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		_, err = walk(root, "src")
	}
	wantErrno(t, "the 11th file", err, unix.ENFILE)
}

// A request reusing a tag in flight is dropped by the framing layer;
// were it handed on, the 9P library would drop it without a reply and
// its slot would never be freed. Rounds of duplicates on a connection
// with two slots must leave it answering.
func TestDuplicateTagsKeepConnectionLive(t *testing.T) {
	_, work := tree(t)
	_, r, _, _ := rawServe(t, work, Limits{Requests: 2})
	r.hello(64 << 10)
	for round := 0; round < 20; round++ {
		for i := 0; i < 4; i++ {
			r.send(tClunk, 50, u32(uint32(1000+round)))
		}
		// At least one reply for tag 50, then a probe on tag 51.
		r.send(tWalk, 51, u32(1), u32(uint32(2000+round)), u16(0))
		for {
			_, tag, _, err := r.recv()
			if err != nil {
				t.Fatalf("round %d: no reply to the probe: %v", round, err)
			}
			if tag == 51 {
				break
			}
		}
	}
}

// Replies larger than the writer's buffer leave before their last Write
// returns; a guest reusing the tag at once must still be answered (its
// request was once dropped as a duplicate, and the read hung).
func TestLargeRepliesBackToBack(t *testing.T) {
	_, work := tree(t)
	big := make([]byte, 8<<20)
	if err := os.WriteFile(filepath.Join(work, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(workspace(), Options{HostDir: work})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host, guest := socketpair.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, host)
	c, err := p9.NewClient(guest, p9.WithMessageSize(512<<10))
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	_, f, err := root.Walk([]string{"big"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 600<<10)
		for off := int64(0); off < int64(len(big)); off += int64(len(buf)) {
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reading 8 MiB in 600 KiB reads did not finish within 20s")
	}
}

// A message the library cannot decode is answered without its tag; the
// connection ends at once rather than hold that request's slot forever.
func TestUndecodableMessageEndsConnection(t *testing.T) {
	_, work := tree(t)
	_, r, _, done := rawServe(t, work, Limits{})
	r.hello(64 << 10)
	// A walk declaring 0xffff names and carrying none.
	r.send(tWalk, 2, u32(1), u32(2), u16(0xffff))
	select {
	case err := <-done:
		done <- err
		if err == nil || !strings.Contains(err.Error(), "decoded") {
			t.Errorf("Serve = %v; want an error about an undecodable message", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the connection was still served 3s after an undecodable message")
	}
}
