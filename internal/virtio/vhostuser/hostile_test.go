//go:build linux

package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
	"github.com/sbx-dev/sbx/internal/virtio/virtqtest"
)

// TestHostileMessages sends requests the backend must refuse: each ends
// the connection with an error (and, where one was asked for, a failure
// acknowledgement first), never a panic or a hang, and the front-end
// sees its end of the connection end.
func TestHostileMessages(t *testing.T) {
	type frontendStep func(f *frontend)
	memfdOf := func(t *testing.T, size int64) int {
		fd, err := unix.MemfdCreate("small", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Ftruncate(fd, size); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	region := func(gpa, size, uva, off uint64) memRegion {
		return memRegion{guestAddr: gpa, size: size, userAddr: uva, mmapOffset: off}
	}
	cases := []struct {
		name string
		want string // in the error
		send frontendStep
	}{
		{"unknown request", "unsupported request", func(f *frontend) { f.send(99, 0, nil) }},
		{"GET_CONFIG", "unsupported request", func(f *frontend) { f.send(reqGetConfig, 0, make([]byte, 12)) }},
		{"SET_LOG_BASE", "unsupported request", func(f *frontend) { f.send(reqSetLogBase, 0, make([]byte, 16)) }},
		{"oversized message", "payload of", func(f *frontend) {
			b := make([]byte, headerSize)
			binary.LittleEndian.PutUint32(b[0:], reqSetMemTable)
			binary.LittleEndian.PutUint32(b[4:], flagVersion)
			binary.LittleEndian.PutUint32(b[8:], math.MaxUint32)
			f.conn.Write(b)
		}},
		{"bad version", "version", func(f *frontend) {
			b := make([]byte, headerSize)
			binary.LittleEndian.PutUint32(b[0:], reqGetFeatures)
			binary.LittleEndian.PutUint32(b[4:], 2)
			f.conn.Write(b)
		}},
		{"a reply flag", "reply", func(f *frontend) { f.send(reqGetFeatures, flagReply, nil) }},
		{"truncated payload", "unexpected EOF", func(f *frontend) {
			b := make([]byte, headerSize+4)
			binary.LittleEndian.PutUint32(b[0:], reqSetFeatures)
			binary.LittleEndian.PutUint32(b[4:], flagVersion)
			binary.LittleEndian.PutUint32(b[8:], 8)
			f.conn.Write(b)
			f.conn.CloseWrite()
		}},
		{"short u64", "want 8", func(f *frontend) { f.send(reqSetFeatures, 0, []byte{1, 2, 3}) }},
		{"payload on GET_FEATURES", "want 0", func(f *frontend) { f.send(reqGetFeatures, 0, []byte{1}) }},
		{"descriptor on GET_FEATURES", "descriptors", func(f *frontend) { f.send(reqGetFeatures, 0, nil, f.kick[0]) }},
		{"too many descriptors", "descriptors", func(f *frontend) {
			fds := make([]int, maxFDs+1)
			for i := range fds {
				fds[i] = f.kick[0]
			}
			f.send(reqSetMemTable, 0, f.ramTable(), fds...)
		}},
		{"features not offered", "not offered", func(f *frontend) { f.send(reqSetFeatures, 0, u64Payload(FeatureVersion1|1<<34)) }},
		{"protocol features not offered", "not offered", func(f *frontend) { f.send(reqSetProtocolFeatures, 0, u64Payload(1<<5)) }},
		{"too many memory regions", "regions", func(f *frontend) {
			rs := make([]memRegion, maxRegions+1)
			for i := range rs {
				rs[i] = region(uint64(i)<<20, 1<<20, userBase+uint64(i)<<20, 0)
			}
			f.send(reqSetMemTable, 0, memTable(rs...), f.memfd)
		}},
		{"no memory regions", "regions", func(f *frontend) { f.send(reqSetMemTable, 0, memTable(), f.memfd) }},
		{"memory table without descriptors", "descriptors", func(f *frontend) { f.send(reqSetMemTable, 0, f.ramTable()) }},
		{"memory table short of its regions", "payload", func(f *frontend) {
			p := f.ramTable()
			binary.LittleEndian.PutUint32(p, 2)
			f.send(reqSetMemTable, 0, p, f.memfd)
		}},
		{"region past its file", "past the end of its file", func(f *frontend) {
			f.send(reqSetMemTable, 0, memTable(region(0, ramSize+4096, userBase, 0)), f.memfd)
		}},
		{"region offset past its file", "past the end of its file", func(f *frontend) {
			f.send(reqSetMemTable, 0, memTable(region(0, 4096, userBase, ramSize)), f.memfd)
		}},
		{"empty region", "empty", func(f *frontend) { f.send(reqSetMemTable, 0, memTable(region(0, 0, userBase, 0)), f.memfd) }},
		{"region wrapping guest space", "address space", func(f *frontend) {
			f.send(reqSetMemTable, 0, memTable(region(math.MaxUint64-4095, 8192, userBase, 0)), f.memfd)
		}},
		{"overlapping guest regions", "overlap", func(f *frontend) {
			fd := memfdOf(t, 1<<20)
			f.send(reqSetMemTable, 0, memTable(region(0, 1<<20, userBase, 0), region(4096, 4096, userBase+(8<<20), 0)), f.memfd, fd)
		}},
		{"overlapping user regions", "overlap", func(f *frontend) {
			fd := memfdOf(t, 1<<20)
			f.send(reqSetMemTable, 0, memTable(region(0, 1<<20, userBase, 0), region(16<<20, 4096, userBase+4096, 0)), f.memfd, fd)
		}},
		{"region not backed by a file", "not backed by a file", func(f *frontend) {
			f.send(reqSetMemTable, 0, memTable(region(0, 4096, userBase, 0)), f.kick[0])
		}},
		{"region whose file cannot be sealed", "shrinking", func(f *frontend) {
			fd, err := unix.MemfdCreate("unsealable", unix.MFD_CLOEXEC) // sealed against seals
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			if err := unix.Ftruncate(fd, 1<<20); err != nil {
				t.Fatal(err)
			}
			f.send(reqSetMemTable, 0, memTable(region(0, 1<<20, userBase, 0)), fd)
		}},
		{"ring index past the queues", "queue 2 of 2", func(f *frontend) { f.send(reqSetVringNum, 0, state(2, 64)) }},
		{"ring size zero", "not 1 to", func(f *frontend) { f.send(reqSetVringNum, 0, state(0, 0)) }},
		{"ring size too large", "not 1 to", func(f *frontend) { f.send(reqSetVringNum, 0, state(0, 65536)) }},
		{"ring base past 16 bits", "16 bits", func(f *frontend) { f.send(reqSetVringBase, 0, state(0, 1<<16)) }},
		{"ring address with logging", "logging", func(f *frontend) {
			p := vringAddrPayload(0, userBase, userBase+0x1000, userBase+0x2000)
			binary.LittleEndian.PutUint32(p[4:], vringFLog)
			f.send(reqSetVringAddr, 0, p)
		}},
		{"kick without a descriptor", "descriptors", func(f *frontend) { f.send(reqSetVringKick, 0, fileIndex(0, false)) }},
		{"kick polling", "polling", func(f *frontend) { f.send(reqSetVringKick, 0, fileIndex(0, true)) }},
		{"call with no-fd and a descriptor", "descriptors", func(f *frontend) { f.send(reqSetVringCall, 0, fileIndex(0, true), f.call[0]) }},
		{"kick with unknown bits", "unknown bits", func(f *frontend) { f.send(reqSetVringKick, 0, u64Payload(1<<20), f.kick[0]) }},
		{"enable with 2", "with 2", func(f *frontend) { f.send(reqSetVringEnable, 0, state(0, 2)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFrontend(t, &upper{}, Options{})
			f.send(reqGetProtocolFeatures, 0, nil)
			f.reply(reqGetProtocolFeatures)
			f.send(reqSetProtocolFeatures, 0, u64Payload(offeredProtocolFeatures))
			c.send(f)
			err := f.serveErr()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Serve = %v, want an error about %q", err, c.want)
			}
			// The front-end reads the end of the connection, not
			// silence: QEMU would otherwise wait on it forever.
			f.conn.SetReadDeadline(time.Now().Add(waitLimit))
			var b [64]byte
			for range 16 {
				if _, err = f.conn.Read(b[:]); err != nil {
					break
				}
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading the front-end's end after Serve's error: %v, want EOF", err)
			}
		})
	}
}

// TestGuestLaidOutQueues: what a guest's driver writes reaches the
// backend through QEMU as it wrote it — a used ring outside RAM (QEMU
// then hands over its bounce buffer, in no memory region), rings
// misaligned, a queue size that is not a power of two, features
// without VIRTIO_F_VERSION_1 — and must not end the connection (QEMU
// would wait on it for its next reply, and the machine freeze): the
// queue is not started, its error descriptor is signalled, the
// connection answers, and after the guest's reset a well-formed start
// serves requests.
func TestGuestLaidOutQueues(t *testing.T) {
	good := uint64(FeatureVersion1 | FeatureProtocolFeatures | FeatureIndirectDesc)
	cases := []struct {
		name     string
		features uint64
		num      uint32
		addr     func(d *virtqtest.Driver) []byte // ring 1's SET_VRING_ADDR payload
	}{
		{name: "used ring outside memory", addr: func(d *virtqtest.Driver) []byte {
			return vringAddrPayload(1, userBase+d.Desc, 0x7f00_0000_0000, userBase+d.Avail)
		}},
		{name: "descriptor table running past memory", addr: func(d *virtqtest.Driver) []byte {
			return vringAddrPayload(1, userBase+ramSize-512, userBase+d.Used, userBase+d.Avail)
		}},
		{name: "misaligned descriptor table", addr: func(d *virtqtest.Driver) []byte {
			return vringAddrPayload(1, userBase+d.Desc+8, userBase+d.Used, userBase+d.Avail)
		}},
		{name: "available ring 2 bytes off a word", addr: func(d *virtqtest.Driver) []byte {
			return vringAddrPayload(1, userBase+d.Desc, userBase+d.Used, userBase+d.Avail+2)
		}},
		{name: "size not a power of two", num: 100},
		{name: "no VIRTIO_F_VERSION_1", features: FeatureProtocolFeatures | FeatureIndirectDesc},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := &upper{}
			f := newFrontend(t, dev, Options{})
			f.realize()
			features := good
			if c.features != 0 {
				features = c.features
			}
			f.send(reqSetFeatures, 0, u64Payload(features))
			f.acked(reqSetMemTable, f.ramTable(), f.memfd)
			for i, d := range f.drv {
				num := uint32(queueSize)
				addr := vringAddrPayload(uint32(i), userBase+d.Desc, userBase+d.Used, userBase+d.Avail)
				if i == 1 && c.num != 0 {
					num = c.num
				}
				if i == 1 && c.addr != nil {
					addr = c.addr(d)
				}
				f.acked(reqSetVringNum, state(uint32(i), num))
				f.acked(reqSetVringBase, state(uint32(i), 0))
				f.acked(reqSetVringAddr, addr)
				f.acked(reqSetVringKick, fileIndex(i, false), f.kick[i])
			}
			for i := range f.drv {
				f.acked(reqSetVringEnable, state(uint32(i), 1))
			}
			if !waitFD(t, f.errFD[1]) {
				t.Fatal("queue 1's error descriptor was not signalled")
			}
			if _, err := f.drv[1].Add([][]byte{[]byte("x")}, []uint32{8}, false, true); err != nil {
				t.Fatal(err)
			}
			f.kickQueue(1)
			if n := f.getU64(reqGetQueueNum); n != uint64(len(f.drv)) {
				t.Fatalf("GET_QUEUE_NUM = %d", n)
			}
			if dev.count() != 0 || f.drv[1].UsedIdx() != 0 {
				t.Fatalf("a queue that was not started served %d chains", dev.count())
			}
			select {
			case err := <-f.done:
				t.Fatalf("Serve returned: %v", err)
			default:
			}

			// The guest resets the device and starts it well-formed.
			f.stop()
			for _, d := range f.drv {
				d.Resume(0)
			}
			f.start(good, true)
			if _, err := f.drv[1].Add([][]byte{[]byte("ping")}, []uint32{8}, false, true); err != nil {
				t.Fatal(err)
			}
			f.kickQueue(1)
			f.waitUsed(1, 1)
			if dev.count() != 1 {
				t.Fatalf("after the reset the device handled %d chains", dev.count())
			}
		})
	}
}

// TestFailureAcknowledged: a refused request that asked for an
// acknowledgement gets a non-zero one before the connection ends.
func TestFailureAcknowledged(t *testing.T) {
	f := newFrontend(t, &upper{}, Options{})
	f.send(reqSetProtocolFeatures, 0, u64Payload(offeredProtocolFeatures))
	f.send(reqSetMemTable, flagNeedReply, memTable(memRegion{size: ramSize * 2, userAddr: userBase}), f.memfd)
	if p := f.reply(reqSetMemTable); len(p) != 8 || binary.LittleEndian.Uint64(p) == 0 {
		t.Fatalf("acknowledgement %x, want a failure", p)
	}
	if err := f.serveErr(); err == nil {
		t.Fatal("Serve went on after a refused memory table")
	}
}

// TestBrokenRingStopsQueue: a guest that breaks one ring stops that queue
// (the error descriptor is signalled); the other queue and the
// connection go on, and GET_VRING_BASE still answers.
func TestBrokenRingStopsQueue(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(f *frontend)
	}{
		{"descriptor index past size", func(f *frontend) {
			d := f.drv[1]
			d.SetAvailEntry(0, queueSize+5)
			d.SetAvailIdx(1)
		}},
		{"available index jumps", func(f *frontend) { f.drv[1].SetAvailIdx(queueSize + 1) }},
		{"buffer past guest memory", func(f *frontend) {
			d := f.drv[1]
			d.SetDesc(d.Desc, 0, ramSize-8, 16, virtq.DescFWrite, 0)
			d.SetAvailEntry(0, 0)
			d.SetAvailIdx(1)
		}},
		{"chain over the byte limit", func(f *frontend) {
			d := f.drv[1]
			d.SetDesc(d.Desc, 0, 0, 0x20000, 0, 0)
			d.SetAvailEntry(0, 0)
			d.SetAvailIdx(1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := &upper{}
			f := newFrontend(t, dev, Options{MaxChainBytes: 0x10000})
			f.start(f.realize(), true)
			c.write(f)
			f.kickQueue(1)
			if !waitFD(t, f.errFD[1]) {
				t.Fatal("the error descriptor was not signalled")
			}
			if dev.count() != 0 {
				t.Fatalf("the device handled %d chains of a broken ring", dev.count())
			}
			if _, err := f.drv[0].Add([][]byte{[]byte("x")}, nil, false, true); err != nil {
				t.Fatal(err)
			}
			f.kickQueue(0)
			f.waitUsed(0, 1)
			f.send(reqGetVringBase, 0, state(1, 0))
			if p := f.reply(reqGetVringBase); binary.LittleEndian.Uint32(p[4:]) != 0 {
				t.Fatalf("GET_VRING_BASE after the failure: %x", p)
			}
		})
	}
}

// TestServeRefusesOptions checks the options Serve refuses.
func TestServeRefusesOptions(t *testing.T) {
	for _, o := range []Options{{Queues: -1}, {Queues: 300}, {Features: FeatureIndirectDesc}, {Features: 1 << 35}, {InFlight: -1}} {
		a, _ := unixPair(t)
		if err := Serve(t.Context(), a, &upper{}, o); err == nil {
			t.Errorf("Serve accepted %+v", o)
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestNoDescriptorLeak runs sessions that end in every way — hung up
// with queues running, refused memory tables, too many descriptors — and
// checks that the process holds no more descriptors afterwards.
func TestNoDescriptorLeak(t *testing.T) {
	session := func(t *testing.T, end func(f *frontend)) {
		f := newFrontend(t, &upper{}, Options{})
		f.start(f.realize(), true)
		end(f)
		f.serveErr()
	}
	ends := []func(f *frontend){
		func(f *frontend) { f.conn.Close() },
		func(f *frontend) {
			f.send(reqSetMemTable, 0, memTable(memRegion{size: ramSize * 2, userAddr: userBase}), f.memfd)
		},
		func(f *frontend) {
			fds := make([]int, maxFDs+2)
			for i := range fds {
				fds[i] = f.kick[0]
			}
			f.send(reqSetMemTable, 0, f.ramTable(), fds...)
		},
		func(f *frontend) { f.send(reqSetVringKick, 0, fileIndex(7, false), f.kick[0]) },
	}
	t.Run("warm-up", func(t *testing.T) { session(t, ends[0]) })
	before := openFDs(t)
	for i, end := range ends {
		for range 5 {
			t.Run(fmt.Sprint(i), func(t *testing.T) { session(t, end) })
		}
	}
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
}

// A front-end that shrinks a memory region's file under the backend's
// mapping would have the backend fault on its next access to the lost
// pages (SIGBUS), which ends the whole process. The backend seals each
// region's file against shrinking before it maps it, so the shrink is
// refused and the queues go on.
func TestMemoryCannotShrinkUnderTheMapping(t *testing.T) {
	dev := &upper{}
	f := newFrontend(t, dev, Options{})
	f.start(f.realize(), true)
	if err := unix.Ftruncate(f.memfd, 0); err == nil {
		// Put the pages back before anything touches them.
		if err := unix.Ftruncate(f.memfd, ramSize); err != nil {
			t.Fatal(err)
		}
		t.Error("the front-end shrank the guest's memory under the backend's mapping")
	}
	if _, err := f.drv[1].Add([][]byte{[]byte("still here")}, []uint32{16}, false, true); err != nil {
		t.Fatal(err)
	}
	f.kickQueue(1)
	f.waitUsed(1, 1)
}
