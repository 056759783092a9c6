//go:build linux

package vhostuser

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
	"github.com/sbx-dev/sbx/internal/virtio/virtqtest"
)

// The test front-end plays QEMU: guest RAM is a memfd both sides map,
// at guest address 0 and at "QEMU's" virtual address userBase.
const (
	ramSize   = 4 << 20
	userBase  = 0x7f12_3400_0000
	queueSize = 64
	waitLimit = 10 * time.Second
)

type frontend struct {
	t     *testing.T
	conn  *net.UnixConn
	memfd int
	ram   []byte
	drv   []*virtqtest.Driver
	kick  []int
	call  []int
	errFD []int
	done  chan error // Serve's result
}

// unixPair returns the two ends of a socket pair as unix connections.
func unixPair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cs [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c.(*net.UnixConn)
	}
	return cs[0], cs[1]
}

func eventfd(t testing.TB) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}

// newFrontend starts Serve on one end of a socket pair with dev and opts
// and returns the front-end for the other end.
func newFrontend(t *testing.T, dev Device, opts Options) *frontend {
	t.Helper()
	ours, theirs := unixPair(t)
	return newFrontendOn(t, dev, opts, ours, theirs)
}

// newFrontendOn starts Serve on theirs and plays the front-end on ours.
func newFrontendOn(t *testing.T, dev Device, opts Options, ours, theirs *net.UnixConn) *frontend {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	memfd, err := unix.MemfdCreate("guest-ram", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(memfd) })
	if err := unix.Ftruncate(memfd, ramSize); err != nil {
		t.Fatal(err)
	}
	ram, err := unix.Mmap(memfd, 0, ramSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	f := &frontend{t: t, conn: ours, memfd: memfd, ram: ram, done: make(chan error, 1)}
	queues := opts.Queues
	if queues == 0 {
		queues = 2
	}
	for i := range queues {
		f.drv = append(f.drv, virtqtest.NewDriver(ram, virtqtest.Layout{
			Base: 0, Size: queueSize,
			Ring:  uint64(i) * 0x10000,
			Arena: 0x100000 + uint64(i)*0x100000, AreaSize: 0x4000,
		}))
		f.kick = append(f.kick, eventfd(t))
		f.call = append(f.call, eventfd(t))
		f.errFD = append(f.errFD, eventfd(t))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { f.done <- Serve(ctx, theirs, dev, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(waitLimit):
			t.Error("Serve did not return after its context ended")
		}
		unix.Munmap(ram)
	})
	return f
}

// send writes one request.
func (f *frontend) send(req, flags uint32, payload []byte, fds ...int) {
	f.t.Helper()
	b := make([]byte, headerSize+len(payload))
	binary.LittleEndian.PutUint32(b[0:], req)
	binary.LittleEndian.PutUint32(b[4:], flagVersion|flags)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	copy(b[headerSize:], payload)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := f.conn.WriteMsgUnix(b, oob, nil); err != nil {
		f.t.Fatalf("sending %s: %v", RequestName(req), err)
	}
}

// reply reads the reply to req.
func (f *frontend) reply(req uint32) []byte {
	f.t.Helper()
	f.conn.SetReadDeadline(time.Now().Add(waitLimit))
	var h [headerSize]byte
	if _, err := readAll(f.conn, h[:]); err != nil {
		f.t.Fatalf("reading the reply to %s: %v", RequestName(req), err)
	}
	got := binary.LittleEndian.Uint32(h[0:])
	flags := binary.LittleEndian.Uint32(h[4:])
	size := binary.LittleEndian.Uint32(h[8:])
	if got != req || flags != flagVersion|flagReply || size > maxPayload {
		f.t.Fatalf("reply to %s: header %s flags %#x size %d", RequestName(req), RequestName(got), flags, size)
	}
	p := make([]byte, size)
	if _, err := readAll(f.conn, p); err != nil {
		f.t.Fatalf("reading the reply to %s: %v", RequestName(req), err)
	}
	return p
}

func readAll(c *net.UnixConn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// getU64 sends a request without payload and returns its u64 reply.
func (f *frontend) getU64(req uint32) uint64 {
	f.t.Helper()
	f.send(req, 0, nil)
	p := f.reply(req)
	if len(p) != 8 {
		f.t.Fatalf("reply to %s of %d bytes", RequestName(req), len(p))
	}
	return binary.LittleEndian.Uint64(p)
}

// acked sends a request asking for an acknowledgement and checks it.
func (f *frontend) acked(req uint32, payload []byte, fds ...int) {
	f.t.Helper()
	f.send(req, flagNeedReply, payload, fds...)
	if p := f.reply(req); len(p) != 8 || binary.LittleEndian.Uint64(p) != 0 {
		f.t.Fatalf("%s was refused: %x", RequestName(req), p)
	}
}

func state(index, num uint32) []byte { return vringState{index, num}.payload() }

func fileIndex(i int, noFD bool) []byte {
	v := uint64(i)
	if noFD {
		v |= vringNoFDMask
	}
	return u64Payload(v)
}

func memTable(rs ...memRegion) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(rs)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	for _, r := range rs {
		b = binary.LittleEndian.AppendUint64(b, r.guestAddr)
		b = binary.LittleEndian.AppendUint64(b, r.size)
		b = binary.LittleEndian.AppendUint64(b, r.userAddr)
		b = binary.LittleEndian.AppendUint64(b, r.mmapOffset)
	}
	return b
}

func (f *frontend) ramTable() []byte {
	return memTable(memRegion{guestAddr: 0, size: ramSize, userAddr: userBase, mmapOffset: 0})
}

func vringAddrPayload(index uint32, desc, used, avail uint64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, index)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, desc)
	b = binary.LittleEndian.AppendUint64(b, used)
	b = binary.LittleEndian.AppendUint64(b, avail)
	return binary.LittleEndian.AppendUint64(b, 0)
}

// realize sends what QEMU 7.2 sends when it realizes vhost-user-fs-pci.
func (f *frontend) realize() uint64 {
	f.t.Helper()
	features := f.getU64(reqGetFeatures)
	if features&FeatureProtocolFeatures == 0 {
		f.t.Fatalf("features %#x lack VHOST_USER_F_PROTOCOL_FEATURES", features)
	}
	proto := f.getU64(reqGetProtocolFeatures)
	if proto&^uint64(offeredProtocolFeatures) != 0 || proto&protoReplyAck == 0 {
		f.t.Fatalf("protocol features %#x", proto)
	}
	f.send(reqSetProtocolFeatures, 0, u64Payload(proto))
	if n := f.getU64(reqGetQueueNum); n != uint64(len(f.drv)) {
		f.t.Fatalf("GET_QUEUE_NUM = %d, want %d", n, len(f.drv))
	}
	f.send(reqSetOwner, 0, nil)
	f.getU64(reqGetFeatures)
	for i := range f.drv {
		f.send(reqSetVringCall, 0, fileIndex(i, false), f.call[i])
		f.send(reqSetVringErr, 0, fileIndex(i, false), f.errFD[i])
	}
	return features
}

// start sends what QEMU 7.2 sends when the guest's driver sets
// DRIVER_OK (recorded from a Linux 6.1 guest probing the device): the
// masked call descriptors, the features, the memory table (the only
// request QEMU asks to be acknowledged), each ring's size, base,
// addresses and kick, SET_VRING_ENABLE for each ring when withEnable,
// then the unmasked call descriptors while the rings run.
func (f *frontend) start(features uint64, withEnable bool) {
	f.t.Helper()
	for i := range f.drv {
		f.send(reqSetVringCall, 0, fileIndex(i, false), f.call[i])
	}
	f.send(reqSetFeatures, 0, u64Payload(features))
	f.acked(reqSetMemTable, f.ramTable(), f.memfd)
	for i, d := range f.drv {
		f.send(reqSetVringNum, 0, state(uint32(i), queueSize))
		f.send(reqSetVringBase, 0, state(uint32(i), 0))
		f.send(reqSetVringAddr, 0, vringAddrPayload(uint32(i), userBase+d.Desc, userBase+d.Used, userBase+d.Avail))
		f.send(reqSetVringKick, 0, fileIndex(i, false), f.kick[i])
	}
	if withEnable {
		for i := range f.drv {
			f.send(reqSetVringEnable, 0, state(uint32(i), 1))
		}
	}
	for i := range f.drv {
		f.send(reqSetVringCall, 0, fileIndex(i, false), f.call[i])
	}
	f.getU64(reqGetQueueNum) // every request above has been handled
}

// stop sends what QEMU 7.2 sends when the device stops (the guest
// resets it, or powers off): each ring disabled, each ring's base asked
// for, the masked call descriptors. It returns the bases.
func (f *frontend) stop() []uint32 {
	f.t.Helper()
	for i := range f.drv {
		f.send(reqSetVringEnable, 0, state(uint32(i), 0))
	}
	var bases []uint32
	for i := range f.drv {
		f.send(reqGetVringBase, 0, state(uint32(i), 0))
		p := f.reply(reqGetVringBase)
		if len(p) != 8 || binary.LittleEndian.Uint32(p) != uint32(i) {
			f.t.Fatalf("GET_VRING_BASE %d: reply %x", i, p)
		}
		bases = append(bases, binary.LittleEndian.Uint32(p[4:]))
	}
	for i := range f.drv {
		f.send(reqSetVringCall, 0, fileIndex(i, false), f.call[i])
	}
	return bases
}

// startRing sets up ring i from base.
func (f *frontend) startRing(i int, base uint16) {
	f.t.Helper()
	d := f.drv[i]
	f.acked(reqSetVringNum, state(uint32(i), queueSize))
	f.acked(reqSetVringBase, state(uint32(i), uint32(base)))
	f.acked(reqSetVringAddr, vringAddrPayload(uint32(i), userBase+d.Desc, userBase+d.Used, userBase+d.Avail))
	f.acked(reqSetVringKick, fileIndex(i, false), f.kick[i])
	f.acked(reqSetVringCall, fileIndex(i, false), f.call[i])
}

func (f *frontend) kickQueue(i int) { signal(f.kick[i]) }

// waitUsed waits, bounded, until queue i's used index reaches n.
func (f *frontend) waitUsed(i int, n uint16) {
	f.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for f.drv[i].UsedIdx() != n {
		left := time.Until(deadline)
		if left <= 0 {
			f.t.Fatalf("queue %d: used index %d, want %d", i, f.drv[i].UsedIdx(), n)
		}
		fds := []unix.PollFd{{Fd: int32(f.call[i]), Events: unix.POLLIN}}
		unix.Poll(fds, int(min(left, 100*time.Millisecond)/time.Millisecond))
		var b [8]byte
		unix.Read(f.call[i], b[:])
	}
}

// waitFD waits, bounded, for an eventfd to be signalled.
func waitFD(t *testing.T, fd int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(waitLimit/time.Millisecond))
	return err == nil && n == 1
}

// serveErr waits, bounded, for Serve's result.
func (f *frontend) serveErr() error {
	f.t.Helper()
	select {
	case err := <-f.done:
		f.done <- err
		return err
	case <-time.After(waitLimit):
		f.t.Fatal("Serve did not return")
		return nil
	}
}

// upper is a device that writes its request upper-cased; with a gate
// each Handle waits for the gate to open (or close).
type upper struct {
	mu      sync.Mutex
	handled int
	now     int
	most    int
	entered chan int // gets the queue of each Handle as it starts, if set
	gate    chan struct{}
}

func (u *upper) Handle(q int, c *virtq.Chain) uint32 {
	u.mu.Lock()
	u.now++
	u.most = max(u.most, u.now)
	u.mu.Unlock()
	if u.entered != nil {
		u.entered <- q
	}
	if u.gate != nil {
		select {
		case <-u.gate:
		case <-time.After(waitLimit):
		}
	}
	in := bytes.ToUpper(bytes.Join(c.Readable, nil))
	n := 0
	for _, w := range c.Writable {
		n += copy(w, in[n:])
	}
	u.mu.Lock()
	u.now--
	u.handled++
	u.mu.Unlock()
	return uint32(n)
}

func (u *upper) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.handled
}

var errTimeout = errors.New("timed out")

// waitEntered waits for n Handle calls to start.
func (u *upper) waitEntered(n int) error {
	for range n {
		select {
		case <-u.entered:
		case <-time.After(waitLimit):
			return errTimeout
		}
	}
	return nil
}

func readNonblock(fd int, b []byte) (int, error) { return unix.Read(fd, b) }

func unixMemfd(size int64) (int, error) {
	fd, err := unix.MemfdCreate("guest-ram", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func pwrite(fd int, b []byte) (int, error) { return unix.Pwrite(fd, b, 0) }

func rightsOf(fds []int) []byte {
	if len(fds) == 0 {
		return nil
	}
	return unix.UnixRights(fds...)
}
