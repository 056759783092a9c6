// Command rawvirtiofs drives a workspace mount's virtio-fs PCI device
// from user space inside a guest, as hostile root would, bypassing the
// guest kernel's virtiofs driver, and prints one line per probe: "NAME
// ok ..." (the host answered), "NAME err ..." (the host refused, with
// its errno) or "NAME fail ..." (the exchange itself broke: no answer,
// a malformed reply). It is built statically by TestWorkspaceMountInVM
// (vfs_vm_test.go) and copied into the guest through the mount itself;
// the test unmounts the mount first.
//
// Usage: rawvirtiofs [VQ-PROBE...]
//
// Naming queue probes ("vq-loop ...") runs only those of them; the
// FUSE probes always run.
//
// It finds the device (vendor 0x1af4, device 0x105a) in sysfs, unbinds
// it from its driver, turns on memory decoding and bus mastering (and
// off INTx: nothing here takes interrupts), finds the virtio vendor
// capabilities in its configuration space, maps the BAR they name and
// initialises the device as a modern virtio driver would, with
// VIRTIO_F_VERSION_1 alone: its two queues (high priority, requests)
// of 8 entries each in locked pages whose guest-physical addresses
// /proc/self/pagemap gives. Requests are posted on the available ring
// and the notify register; the used ring is polled, at most 5 s a
// request.
//
// Over it it speaks FUSE: INIT, then GETATTR, LOOKUP, OPEN and READ on
// node IDs and file handles never handed out, the control read of
// README.md, the root's listing, lookups of hidden, malformed and
// outside names, links, renames, symlinks, device nodes and creations
// onto hidden names, writes under the read-only paths, and a FORGET
// storm on the high-priority queue. Then it breaks the request queue
// in each way the host must survive: buffers outside memory, huge
// lengths, loops, indirect tables unnegotiated, nested, outside memory
// or malformed, an available index far ahead, rings outside memory, in
// ROM or misaligned, a queue size that is not a power of two, no
// VIRTIO_F_VERSION_1. After each ("vq-NAME ..."), it says whether the
// broken chain came back, whether the device still answered a
// well-formed request, what the device status was (NEEDS_RESET is
// 0x40), and whether the device answered after a reset. It ends with
// FUSE DESTROY, a reset, and "done". Every wait is bounded.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	fp "github.com/sbx-dev/sbx/internal/proto/fuseproto"
)

const (
	pciVendor = 0x1af4
	pciDevice = 0x105a // virtio-fs, modern only

	pageSize   = 4096
	queueSize  = 8
	reqTimeout = 5 * time.Second
	// hostileWait is how long a broken chain, and the request after
	// it, are given to come back.
	hostileWait = 2 * time.Second
	// queueProbesTime bounds the queue probes, whose broken rings each
	// cost a request's timeout; main's watchdog bounds everything.
	queueProbesTime = 4 * time.Minute
	watchdog        = 6 * time.Minute
)

// started is when the program started.
var started = time.Now()

// virtio PCI vendor capability types (virtio 1.x, 4.1.4).
const (
	capCommon = 1
	capNotify = 2
	capISR    = 3
	capDevice = 4
)

// Offsets in the common configuration structure.
const (
	cDevFeatSel = 0x00
	cDevFeat    = 0x04
	cDrvFeatSel = 0x08
	cDrvFeat    = 0x0c
	cMsix       = 0x10
	cNumQueues  = 0x12
	cStatus     = 0x14
	cQSel       = 0x16
	cQSize      = 0x18
	cQMsix      = 0x1a
	cQEnable    = 0x1c
	cQNotifyOff = 0x1e
	cQDesc      = 0x20
	cQAvail     = 0x28
	cQUsed      = 0x30
	commonSize  = 0x38
)

// Device status bits.
const (
	sAck        = 1
	sDriver     = 2
	sDriverOK   = 4
	sFeaturesOK = 8
	sNeedsReset = 0x40
	sFailed     = 0x80
)

const (
	featIndirect = 1 << 28
	featVersion1 = 1 << 32

	noVector = 0xffff

	descNext     = 1
	descWrite    = 2
	descIndirect = 4
)

// A guest-physical address no RAM of a 512 MiB guest reaches, and one
// in the firmware's ROM at the top of the first 4 GiB (QEMU's pc.bios,
// RAM of QEMU's but no part of the guest memory it shares).
const (
	outsideRAM = 0x40_0000_0000
	romAddr    = 0xffff0000
)

// Pages of the DMA arena.
const (
	pHiRing  = 0 // high-priority queue: descriptors, available, used
	pReqRing = 1 // request queue
	pTable   = 2 // indirect tables
	pReq     = 3 // a request
	pReply   = 4 // a reply: pages 4 and 5
	pHiBufs  = 6 // high-priority requests: 8 slots of 512 bytes
	pBatch   = 7 // a BATCH_FORGET
	pSpare   = 8 // pages 8 to 15: split requests
	arenaLen = 16
)

// Offsets in a ring page.
const (
	availOff = 0x200
	usedOff  = 0x400
)

var le = binary.LittleEndian

// errNoAnswer is a request the device did not return in time.
var errNoAnswer = errors.New("no answer")

// mmio accessors: one access of the given width each, never merged or
// elided (noinline), bounds checked.

//go:noinline
func rd8(b []byte, off int) uint8 { _ = b[off]; return *(*uint8)(unsafe.Pointer(&b[off])) }

//go:noinline
func rd16(b []byte, off int) uint16 { _ = b[off+1]; return *(*uint16)(unsafe.Pointer(&b[off])) }

//go:noinline
func rd32(b []byte, off int) uint32 { _ = b[off+3]; return *(*uint32)(unsafe.Pointer(&b[off])) }

//go:noinline
func wr8(b []byte, off int, v uint8) { _ = b[off]; *(*uint8)(unsafe.Pointer(&b[off])) = v }

//go:noinline
func wr16(b []byte, off int, v uint16) { _ = b[off+1]; *(*uint16)(unsafe.Pointer(&b[off])) = v }

//go:noinline
func wr32(b []byte, off int, v uint32) { _ = b[off+3]; *(*uint32)(unsafe.Pointer(&b[off])) = v }

func wr64(b []byte, off int, v uint64) {
	wr32(b, off, uint32(v))
	wr32(b, off+4, uint32(v>>32))
}

// pci is the device's PCI function: its configuration space file and
// the virtio structures in its BARs.
type pci struct {
	bdf, dir string
	cfg      *os.File

	common, notify, isr []byte
	notifyMult          uint32
}

func readHex(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 0, 32)
}

// findDevice returns the sysfs directory of the first virtio-fs device.
func findDevice() (string, error) {
	const root = "/sys/bus/pci/devices"
	ents, err := os.ReadDir(root)
	if err != nil {
		return "", err
	}
	for i, e := range ents {
		if i >= 256 {
			break
		}
		dir := filepath.Join(root, e.Name())
		v, err1 := readHex(filepath.Join(dir, "vendor"))
		d, err2 := readHex(filepath.Join(dir, "device"))
		if err1 == nil && err2 == nil && v == pciVendor && d == pciDevice {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no PCI device %04x:%04x among %d", pciVendor, pciDevice, len(ents))
}

// openPCI unbinds the device from its driver, enables it and maps the
// virtio structures its capabilities name.
func openPCI(out io.Writer, dir string) (*pci, error) {
	p := &pci{bdf: filepath.Base(dir), dir: dir}
	if drv, err := os.Readlink(filepath.Join(dir, "driver")); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "driver", "unbind"), []byte(p.bdf), 0); err != nil {
			return nil, fmt.Errorf("unbinding from %s: %w", filepath.Base(drv), err)
		}
		fmt.Fprintf(out, "unbind ok from %s\n", filepath.Base(drv))
	} else {
		fmt.Fprintln(out, "unbind ok no driver")
	}
	cfg, err := os.OpenFile(filepath.Join(dir, "config"), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	p.cfg = cfg
	space := make([]byte, 256)
	if n, err := cfg.ReadAt(space, 0); n < len(space) {
		return nil, fmt.Errorf("config space: %d bytes: %v", n, err)
	}
	// Memory space, bus master, INTx disabled.
	cmd := le.Uint16(space[4:]) | 1<<1 | 1<<2 | 1<<10
	if _, err := cfg.WriteAt(le.AppendUint16(nil, cmd), 4); err != nil {
		return nil, fmt.Errorf("command register: %w", err)
	}
	if le.Uint16(space[6:])&0x10 == 0 {
		return nil, errors.New("no capability list")
	}
	type capability struct {
		bar         int
		off, length uint32
		mult        uint32 // notify_off_multiplier, of the notify capability
	}
	caps := map[uint8]*capability{}
	ptr := int(space[0x34]) &^ 3
	for n := 0; ptr >= 0x40 && ptr+20 <= len(space) && n < 48; n++ {
		if space[ptr] == 0x09 {
			typ := space[ptr+3]
			if c := caps[typ]; c == nil && typ >= capCommon && typ <= capDevice {
				caps[typ] = &capability{
					bar: int(space[ptr+4]), off: le.Uint32(space[ptr+8:]), length: le.Uint32(space[ptr+12:]),
					mult: le.Uint32(space[ptr+16:]),
				}
			}
		}
		ptr = int(space[ptr+1]) &^ 3
	}
	bars := map[int][]byte{}
	region := func(typ uint8, min uint32) ([]byte, error) {
		c := caps[typ]
		if c == nil {
			return nil, fmt.Errorf("no virtio capability of type %d", typ)
		}
		if c.bar > 5 || c.length < min {
			return nil, fmt.Errorf("capability %d: BAR %d, %d bytes", typ, c.bar, c.length)
		}
		bar, ok := bars[c.bar]
		if !ok {
			f, err := os.OpenFile(filepath.Join(dir, "resource"+strconv.Itoa(c.bar)), os.O_RDWR, 0)
			if err != nil {
				return nil, err
			}
			st, err := f.Stat()
			if err != nil || st.Size() <= 0 || st.Size() > 1<<30 {
				f.Close()
				return nil, fmt.Errorf("BAR %d: size %v, %v", c.bar, st.Size(), err)
			}
			bar, err = unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("mapping BAR %d: %w", c.bar, err)
			}
			bars[c.bar] = bar
			fmt.Fprintf(out, "bar ok %d of %d bytes\n", c.bar, len(bar))
		}
		if uint64(c.off)+uint64(c.length) > uint64(len(bar)) {
			return nil, fmt.Errorf("capability %d: %#x+%#x past BAR %d's %#x bytes", typ, c.off, c.length, c.bar, len(bar))
		}
		return bar[c.off : c.off+c.length], nil
	}
	if p.common, err = region(capCommon, commonSize); err != nil {
		return nil, err
	}
	if p.notify, err = region(capNotify, 2); err != nil {
		return nil, err
	}
	if p.isr, err = region(capISR, 1); err != nil {
		return nil, err
	}
	p.notifyMult = caps[capNotify].mult
	return p, nil
}

// arena is locked memory whose pages' guest-physical addresses are
// known.
type arena struct {
	mem  []byte
	phys []uint64
}

func newArena(pages int) (*arena, error) {
	// Pages the device writes must not move: no huge pages, locked,
	// and no compaction of locked pages (best effort).
	os.WriteFile("/proc/sys/vm/compact_unevictable_allowed", []byte("0"), 0)
	mem, err := unix.Mmap(-1, 0, pages*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	for i := range pages {
		mem[i*pageSize] = 1
	}
	if err := unix.Mlock(mem); err != nil {
		return nil, fmt.Errorf("mlock: %w", err)
	}
	clear(mem)
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	a := &arena{mem: mem}
	base := uint64(uintptr(unsafe.Pointer(&mem[0]))) / pageSize
	for i := range pages {
		var e [8]byte
		if _, err := pm.ReadAt(e[:], int64((base+uint64(i))*8)); err != nil {
			return nil, fmt.Errorf("pagemap: %w", err)
		}
		v := le.Uint64(e[:])
		pfn := v & (1<<55 - 1)
		if v>>63 == 0 || pfn == 0 {
			return nil, fmt.Errorf("page %d: pagemap entry %#x (not present, or PFNs hidden)", i, v)
		}
		a.phys = append(a.phys, pfn*pageSize)
	}
	return a, nil
}

func (a *arena) page(i int) []byte { return a.mem[i*pageSize : (i+1)*pageSize] }
func (a *arena) addr(i int) uint64 { return a.phys[i] }

// queue is the driver's side of one split virtqueue.
type queue struct {
	index uint16
	size  uint16
	ring  []byte // its page: descriptors at 0, available at availOff, used at usedOff
	pa    uint64 // the page's guest-physical address
	// notify is where its kicks are written.
	notify []byte

	availIdx, usedSeen uint16
}

func (q *queue) setDesc(i int, addr uint64, length uint32, flags, next uint16) {
	d := q.ring[16*i : 16*i+16]
	le.PutUint64(d[0:], addr)
	le.PutUint32(d[8:], length)
	le.PutUint16(d[12:], flags)
	le.PutUint16(d[14:], next)
}

func (q *queue) availWord() *uint32 { return (*uint32)(unsafe.Pointer(&q.ring[availOff])) }
func (q *queue) usedWord() *uint32  { return (*uint32)(unsafe.Pointer(&q.ring[usedOff])) }

// add puts head in the next available slot; publish makes the slots
// added so far visible (with interrupts suppressed) and kicks.
func (q *queue) add(head uint16) {
	le.PutUint16(q.ring[availOff+4+2*int(q.availIdx%q.size):], head)
	q.availIdx++
}

func (q *queue) publish() {
	atomic.StoreUint32(q.availWord(), uint32(q.availIdx)<<16|1)
	wr16(q.notify, 0, q.index)
}

// setAvailIdx publishes an arbitrary available index and kicks.
func (q *queue) setAvailIdx(idx uint16) {
	q.availIdx = idx
	q.publish()
}

// waitUsed polls for the next used element, at most timeout.
func (q *queue) waitUsed(timeout time.Duration) (id, length uint32, ok bool) {
	deadline := time.Now().Add(timeout)
	for i := 0; i < 50_000_000; i++ {
		if idx := uint16(atomic.LoadUint32(q.usedWord()) >> 16); idx != q.usedSeen {
			e := q.ring[usedOff+4+8*int(q.usedSeen%q.size):]
			q.usedSeen++
			return le.Uint32(e), le.Uint32(e[4:]), true
		}
		if i%64 == 63 {
			if time.Now().After(deadline) {
				return 0, 0, false
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return 0, 0, false
}

// device is the virtio-fs device as this driver runs it.
type device struct {
	out io.Writer
	pci *pci
	mem *arena
	hi  *queue
	req *queue
	// features is what the last start negotiated.
	features uint64
	// wait, when set, replaces reqTimeout for the request queue.
	wait time.Duration
}

// setup is how start lays out the request queue; zero values are a
// well-formed queue.
type setup struct {
	features                      uint64 // 0: VIRTIO_F_VERSION_1
	noFeatures                    bool   // acknowledge none at all
	size                          uint16
	descAddr, availAddr, usedAddr uint64
}

func (d *device) status() uint8 { return rd8(d.pci.common, cStatus) }

func (d *device) reset() error {
	wr8(d.pci.common, cStatus, 0)
	for i := 0; i < 1000; i++ {
		if d.status() == 0 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("status %#x after reset", d.status())
}

// start resets the device and brings it up with both queues.
func (d *device) start(s setup) error {
	c := d.pci.common
	if err := d.reset(); err != nil {
		return err
	}
	wr8(c, cStatus, sAck)
	wr8(c, cStatus, sAck|sDriver)
	wr32(c, cDevFeatSel, 0)
	offered := uint64(rd32(c, cDevFeat))
	wr32(c, cDevFeatSel, 1)
	offered |= uint64(rd32(c, cDevFeat)) << 32
	want := s.features
	if want == 0 && !s.noFeatures {
		want = featVersion1
	}
	if want&^offered != 0 {
		return fmt.Errorf("features %#x not offered (%#x)", want, offered)
	}
	wr32(c, cDrvFeatSel, 0)
	wr32(c, cDrvFeat, uint32(want))
	wr32(c, cDrvFeatSel, 1)
	wr32(c, cDrvFeat, uint32(want>>32))
	wr8(c, cStatus, sAck|sDriver|sFeaturesOK)
	if st := d.status(); st&sFeaturesOK == 0 {
		return fmt.Errorf("the device refused features %#x (status %#x)", want, st)
	}
	d.features = want
	if n := rd16(c, cNumQueues); n < 2 {
		return fmt.Errorf("%d queues", n)
	}
	wr16(c, cMsix, noVector)
	for _, q := range []*queue{d.hi, d.req} {
		wr16(c, cQSel, q.index)
		if max := rd16(c, cQSize); max < queueSize {
			return fmt.Errorf("queue %d holds at most %d", q.index, max)
		}
		clear(q.ring)
		q.availIdx, q.usedSeen, q.size = 0, 0, queueSize
		atomic.StoreUint32(q.availWord(), 1) // no interrupts
		size := uint16(queueSize)
		desc, avail, used := q.pa, q.pa+availOff, q.pa+usedOff
		if q == d.req {
			if s.size != 0 {
				size = s.size
			}
			if s.descAddr != 0 {
				desc = s.descAddr
			}
			if s.availAddr != 0 {
				avail = s.availAddr
			}
			if s.usedAddr != 0 {
				used = s.usedAddr
			}
		}
		wr16(c, cQSize, size)
		wr16(c, cQMsix, noVector)
		wr64(c, cQDesc, desc)
		wr64(c, cQAvail, avail)
		wr64(c, cQUsed, used)
		off := uint64(rd16(c, cQNotifyOff)) * uint64(d.pci.notifyMult)
		if off+2 > uint64(len(d.pci.notify)) {
			return fmt.Errorf("queue %d notify offset %#x past the notify region", q.index, off)
		}
		q.notify = d.pci.notify[off : off+2]
		wr16(c, cQEnable, 1)
	}
	wr8(c, cStatus, sAck|sDriver|sFeaturesOK|sDriverOK)
	if st := d.status(); st&(sFailed|sNeedsReset) != 0 {
		return fmt.Errorf("status %#x after DRIVER_OK", st)
	}
	return nil
}

// roundTrip sends one request on the request queue (descriptor 0
// readable, 1 and 2 writable, two pages) and returns the reply.
func (d *device) roundTrip(req []byte) ([]byte, error) {
	q := d.req
	if len(req) > pageSize {
		return nil, fmt.Errorf("request of %d bytes", len(req))
	}
	copy(d.mem.page(pReq), req)
	reply := d.mem.mem[pReply*pageSize : (pReply+2)*pageSize]
	clear(reply)
	q.setDesc(0, d.mem.addr(pReq), uint32(len(req)), descNext, 1)
	q.setDesc(1, d.mem.addr(pReply), pageSize, descWrite|descNext, 2)
	q.setDesc(2, d.mem.addr(pReply+1), pageSize, descWrite, 0)
	return d.finish(0)
}

// finish publishes head, kicks, and waits for the chain to come back.
func (d *device) finish(head uint16) ([]byte, error) {
	q := d.req
	q.add(head)
	q.publish()
	wait := reqTimeout
	if d.wait != 0 {
		wait = d.wait
	}
	id, n, ok := q.waitUsed(wait)
	if !ok {
		return nil, fmt.Errorf("%w within %v (status %#x)", errNoAnswer, wait, d.status())
	}
	if id != uint32(head) || n > 2*pageSize {
		return nil, fmt.Errorf("used element (%d, %d) for head %d", id, n, head)
	}
	return append([]byte(nil), d.mem.mem[pReply*pageSize:pReply*pageSize+int(n)]...), nil
}

// hiprio posts requests on the high-priority queue (at most its size,
// each one readable descriptor) and waits for them all.
func (d *device) hiprio(reqs [][]byte) error {
	q := d.hi
	if len(reqs) > int(q.size) {
		return fmt.Errorf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		var addr uint64
		switch {
		case len(r) <= 512:
			copy(d.mem.page(pHiBufs)[512*i:], r)
			addr = d.mem.addr(pHiBufs) + uint64(512*i)
		case len(r) <= pageSize && len(reqs) == 1:
			copy(d.mem.page(pBatch), r)
			addr = d.mem.addr(pBatch)
		default:
			return fmt.Errorf("high-priority request of %d bytes", len(r))
		}
		q.setDesc(i, addr, uint32(len(r)), 0, 0)
		q.add(uint16(i))
	}
	q.publish()
	for range reqs {
		if _, _, ok := q.waitUsed(reqTimeout); !ok {
			return fmt.Errorf("high-priority queue: %w within %v", errNoAnswer, reqTimeout)
		}
	}
	return nil
}

// refused is an errno the host answered with.
type refused struct {
	step  string
	errno syscall.Errno
}

func (r *refused) Error() string {
	return fmt.Sprintf("%s: %s (%v)", r.step, unix.ErrnoName(r.errno), r.errno)
}

// client speaks FUSE over the device.
type client struct {
	d      *device
	out    io.Writer
	unique uint64
}

// call sends op on node and returns the reply's payload; a refusal is
// a *refused.
func (c *client) call(step string, op fp.Opcode, node uint64, args any) ([]byte, error) {
	c.unique++
	req := fp.EncodeRequest(fp.InHeader{Opcode: op, Unique: c.unique, NodeID: node, PID: uint32(os.Getpid())}, args)
	return c.raw(step, req, c.unique)
}

// raw sends an encoded request whose unique ID is unique.
func (c *client) raw(step string, req []byte, unique uint64) ([]byte, error) {
	r, err := c.d.roundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	return c.parse(step, r, unique)
}

func (c *client) parse(step string, r []byte, unique uint64) ([]byte, error) {
	length, errno, u, ok := fp.OutHeader(r)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: reply of %d bytes", step, len(r))
	case u != unique:
		return nil, fmt.Errorf("%s: reply to %d, not %d", step, u, unique)
	case int(length) != len(r):
		return nil, fmt.Errorf("%s: reply says %d bytes, has %d", step, length, len(r))
	case errno != 0:
		return nil, &refused{step: step, errno: errno}
	}
	return r[fp.OutHeaderSize:], nil
}

// entry is what a lookup returned.
type entry struct {
	node uint64
	mode uint32
	size uint64
}

func decodeEntry(step string, p []byte) (entry, error) {
	if len(p) < fp.EntryOutSize {
		return entry{}, fmt.Errorf("%s: entry of %d bytes", step, len(p))
	}
	return entry{node: le.Uint64(p), size: le.Uint64(p[48:]), mode: le.Uint32(p[100:])}, nil
}

func (c *client) lookup(parent uint64, name string) (entry, error) {
	step := fmt.Sprintf("lookup %.40q", name)
	p, err := c.call(step, fp.OpLookup, parent, fp.NameIn{Name: name})
	if err != nil {
		return entry{}, err
	}
	return decodeEntry(step, p)
}

// walk looks names up one below the other from the root.
func (c *client) walk(names ...string) (entry, error) {
	e := entry{node: fp.RootID, mode: unix.S_IFDIR}
	for _, n := range names {
		var err error
		if e, err = c.lookup(e.node, n); err != nil {
			return e, err
		}
	}
	return e, nil
}

func (c *client) open(node uint64, flags uint32) (uint64, error) {
	p, err := c.call("open", fp.OpOpen, node, fp.OpenIn{Flags: flags})
	if err != nil {
		return 0, err
	}
	if len(p) < fp.OpenOutSize {
		return 0, fmt.Errorf("open: reply of %d bytes", len(p))
	}
	return le.Uint64(p), nil
}

func (c *client) read(node, fh uint64, size uint32) ([]byte, error) {
	return c.call("read", fp.OpRead, node, fp.ReadIn{Fh: fh, Size: size})
}

func (c *client) release(node, fh uint64) {
	c.call("release", fp.OpRelease, node, fp.ReleaseIn{Fh: fh})
}

// readFile walks to names, opens, reads and releases.
func (c *client) readFile(names ...string) (string, error) {
	e, err := c.walk(names...)
	if err != nil {
		return "", err
	}
	return c.readNode(e.node)
}

// found walks to names: any node found is "ok", with its content when
// it can be read.
func (c *client) found(names ...string) (string, error) {
	e, err := c.walk(names...)
	if err != nil {
		return "", err
	}
	s, err := c.readNode(e.node)
	if err != nil {
		return fmt.Sprintf("node %d mode %o, not read (%v)", e.node, e.mode, err), nil
	}
	return s, nil
}

func (c *client) readNode(node uint64) (string, error) {
	fh, err := c.open(node, unix.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer c.release(node, fh)
	b, err := c.read(node, fh, 4096)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%q", b), nil
}

// list reads a directory with READDIR or READDIRPLUS.
func (c *client) list(node uint64, plus bool) ([]string, error) {
	p, err := c.call("opendir", fp.OpOpendir, node, fp.OpenIn{Flags: unix.O_RDONLY})
	if err != nil {
		return nil, err
	}
	if len(p) < fp.OpenOutSize {
		return nil, errors.New("opendir: short reply")
	}
	fh := le.Uint64(p)
	defer c.call("releasedir", fp.OpReleasedir, node, fp.ReleaseIn{Fh: fh})
	op := fp.OpReaddir
	if plus {
		op = fp.OpReaddirplus
	}
	var names []string
	var off uint64
	for range 64 {
		p, err := c.call("readdir", op, node, fp.ReadIn{Fh: fh, Offset: off, Size: 4096})
		if err != nil {
			return names, err
		}
		if len(p) == 0 {
			return names, nil
		}
		for n := 0; len(p) > 0 && n < 1000; n++ {
			if plus {
				if len(p) < fp.EntryOutSize {
					return names, errors.New("short direntplus")
				}
				p = p[fp.EntryOutSize:]
			}
			if len(p) < 24 {
				return names, errors.New("short dirent")
			}
			off = le.Uint64(p[8:])
			l := int(le.Uint32(p[16:]))
			if 24+l > len(p) {
				return names, errors.New("dirent name past the reply")
			}
			names = append(names, string(p[24:24+l]))
			p = p[min(len(p), (24+l+7)&^7):]
		}
	}
	return names, errors.New("the listing did not end")
}

// probe runs f and prints its line.
func (c *client) probe(name string, f func() (string, error)) {
	s, err := f()
	var r *refused
	switch {
	case err == nil:
		fmt.Fprintf(c.out, "%s ok %s\n", name, s)
	case errors.As(err, &r):
		fmt.Fprintf(c.out, "%s err %v\n", name, err)
	default:
		fmt.Fprintf(c.out, "%s fail %v\n", name, err)
	}
}

// forged tries op on each id and says which answered.
func (c *client) forged(name string, ids []uint64, try func(id uint64) error) {
	var answered []string
	errnos := map[string]int{}
	var failed error
	for _, id := range ids {
		err := try(id)
		var r *refused
		switch {
		case err == nil:
			answered = append(answered, strconv.FormatUint(id, 10))
		case errors.As(err, &r):
			errnos[unix.ErrnoName(r.errno)]++
		default:
			failed = err
		}
	}
	switch {
	case failed != nil:
		fmt.Fprintf(c.out, "%s fail %v\n", name, failed)
	case len(answered) > 0:
		fmt.Fprintf(c.out, "%s ok answered for %s\n", name, strings.Join(answered, ","))
	default:
		fmt.Fprintf(c.out, "%s err all %d refused %v\n", name, len(ids), errnos)
	}
}

// alive says whether the device answers a GETATTR of the root.
func (c *client) alive() error {
	_, err := c.call("getattr", fp.OpGetattr, fp.RootID, fp.GetattrIn{})
	return err
}

func main() {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: rawvirtiofs [VQ-PROBE...]")
		os.Exit(2)
	}
	// Bound the whole run: a device that hangs must not hang the test.
	time.AfterFunc(watchdog, func() {
		fmt.Println("timeout")
		os.Exit(3)
	})
	os.Exit(run(os.Stdout, os.Args[1:]))
}

func run(out io.Writer, only []string) int {
	dir, err := findDevice()
	if err != nil {
		fmt.Fprintf(out, "device fail %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "device ok %s\n", filepath.Base(dir))
	p, err := openPCI(out, dir)
	if err != nil {
		fmt.Fprintf(out, "pci fail %v\n", err)
		return 1
	}
	mem, err := newArena(arenaLen)
	if err != nil {
		fmt.Fprintf(out, "memory fail %v\n", err)
		return 1
	}
	d := &device{out: out, pci: p, mem: mem,
		hi:  &queue{index: 0, ring: mem.page(pHiRing), pa: mem.addr(pHiRing)},
		req: &queue{index: 1, ring: mem.page(pReqRing), pa: mem.addr(pReqRing)},
	}
	if err := d.start(setup{}); err != nil {
		fmt.Fprintf(out, "start fail %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "start ok status %#x features %#x\n", d.status(), d.features)
	c := &client{d: d, out: out}

	// INIT: the kernel's FUSE connection ended with its DESTROY at umount.
	initIn := fp.InitIn{Major: fp.Major, Minor: fp.Minor, MaxReadahead: 1 << 17, Flags: fp.InitAsyncRead | fp.InitBigWrites | fp.InitMaxPages | fp.InitDoReaddirplus}
	if b, err := c.call("init", fp.OpInit, 0, initIn); err != nil {
		fmt.Fprintf(out, "init fail %v\n", err)
		return 1
	} else if len(b) >= 24 {
		fmt.Fprintf(out, "init ok %d.%d max_write %d\n", le.Uint32(b), le.Uint32(b[4:]), le.Uint32(b[20:]))
	}

	fuseProbes(c)
	queueProbes(c, only)

	c.probe("destroy", func() (string, error) {
		_, err := c.call("destroy", fp.OpDestroy, 0, nil)
		return "", err
	})
	d.reset()
	fmt.Fprintln(out, "done")
	return 0
}

// fuseProbes are the FUSE requests a hostile guest can send on a
// well-formed queue.
func fuseProbes(c *client) {
	// Before anything was looked up or opened, no node but the root
	// and no handle exists.
	ids := []uint64{0, 65, 100, 1000, 1 << 20, 1 << 32, 1 << 40, 1 << 63, ^uint64(0), ^uint64(0) - 1}
	for id := uint64(2); id <= 64; id++ {
		ids = append(ids, id)
	}
	for range 4 {
		ids = append(ids, rand.Uint64())
	}
	c.forged("forged-getattr", ids, func(id uint64) error {
		_, err := c.call("getattr", fp.OpGetattr, id, fp.GetattrIn{})
		return err
	})
	c.forged("forged-lookup", ids, func(id uint64) error { _, err := c.lookup(id, "README.md"); return err })
	c.forged("forged-open", ids, func(id uint64) error { _, err := c.open(id, unix.O_RDONLY); return err })
	c.forged("forged-opendir", ids, func(id uint64) error {
		_, err := c.call("opendir", fp.OpOpendir, id, fp.OpenIn{})
		return err
	})
	c.forged("forged-readlink", ids, func(id uint64) error { _, err := c.call("readlink", fp.OpReadlink, id, nil); return err })
	fhs := append([]uint64{}, ids...)
	fhs = append(fhs, 1)
	c.forged("forged-read", fhs, func(fh uint64) error { _, err := c.read(fp.RootID, fh, 4096); return err })
	c.forged("forged-readdir", fhs, func(fh uint64) error {
		_, err := c.call("readdir", fp.OpReaddirplus, fp.RootID, fp.ReadIn{Fh: fh, Size: 4096})
		return err
	})
	c.forged("forged-write", fhs, func(fh uint64) error {
		_, err := c.call("write", fp.OpWrite, fp.RootID, fp.WriteIn{Fh: fh, Size: 1, Data: []byte("x")})
		return err
	})
	c.forged("forged-release", fhs, func(fh uint64) error {
		_, err := c.call("release", fp.OpRelease, fp.RootID, fp.ReleaseIn{Fh: fh})
		return err
	})
	c.forged("forged-fsync", fhs, func(fh uint64) error {
		_, err := c.call("fsync", fp.OpFsync, fp.RootID, fp.FsyncIn{Fh: fh})
		return err
	})

	// The listing and the control read.
	for _, plus := range []bool{false, true} {
		names, err := c.list(fp.RootID, plus)
		label := map[bool]string{false: "readdir", true: "readdirplus"}[plus]
		status := "ok"
		if err != nil {
			status = "fail " + err.Error()
		}
		fmt.Fprintf(c.out, "%s %s %q\n", label, status, strings.Join(names, "/"))
	}
	c.probe("control", func() (string, error) { return c.readFile("README.md") })

	// Hidden names, and names no kernel would send.
	readProbe := func(name string, names ...string) {
		c.probe(name, func() (string, error) { return c.found(names...) })
	}
	readProbe("env", ".env")
	readProbe("gitconfig", ".git", "config")
	readProbe("pem", "keys", "deploy.pem")
	readProbe("deep-pem", "src", "deep", "cert.pem")
	readProbe("dotdot", "..")
	readProbe("dotdot-passwd", "..", "etc", "passwd")
	readProbe("dotdot-inside", "src", "..")
	readProbe("dot", ".")
	readProbe("empty", "")
	readProbe("slashname", ".git/config")
	readProbe("slash-up", "../etc/hostname")
	readProbe("slash-abs", "/etc/hostname")
	readProbe("longname", strings.Repeat("a", 300))
	readProbe("longname-256", strings.Repeat("b", 256))
	c.probe("nul-trailing", func() (string, error) {
		// "README.md\0.env": the name ends at the NUL, the rest is junk.
		c.unique++
		req := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpLookup, Unique: c.unique, NodeID: fp.RootID}, fp.NameIn{Name: "README.md\x00.env"})
		p, err := c.raw("lookup", req, c.unique)
		if err != nil {
			return "", err
		}
		e, err := decodeEntry("lookup", p)
		if err != nil {
			return "", err
		}
		return c.readNode(e.node)
	})

	// Handles: a read-only handle does not write; a released one is
	// gone; a forgotten node is gone.
	c.probe("write-rdonly-fh", func() (string, error) {
		e, err := c.walk("README.md")
		if err != nil {
			return "", err
		}
		fh, err := c.open(e.node, unix.O_RDONLY)
		if err != nil {
			return "", err
		}
		defer c.release(e.node, fh)
		_, err = c.call("write", fp.OpWrite, e.node, fp.WriteIn{Fh: fh, Size: 5, Data: []byte("owned")})
		return "wrote", err
	})
	c.probe("read-released", func() (string, error) {
		e, err := c.walk("README.md")
		if err != nil {
			return "", err
		}
		fh, err := c.open(e.node, unix.O_RDONLY)
		if err != nil {
			return "", err
		}
		c.release(e.node, fh)
		b, err := c.read(e.node, fh, 4096)
		return fmt.Sprintf("%q", b), err
	})
	c.probe("getattr-forgotten", func() (string, error) {
		e, err := c.walk("src", "main.go")
		if err != nil {
			return "", err
		}
		c.unique++
		forget := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpForget, Unique: c.unique, NodeID: e.node}, fp.ForgetIn{Nlookup: 1 << 40})
		if err := c.d.hiprio([][]byte{forget}); err != nil {
			return "", err
		}
		_, err = c.call("getattr", fp.OpGetattr, e.node, fp.GetattrIn{})
		return fmt.Sprintf("node %d still answers", e.node), err
	})

	linkProbes(c)
	readonlyProbes(c)
	protocolProbes(c)
	forgetStorm(c)
}

// linkProbes plant links, renames, symlinks and device nodes onto
// hidden names and through the mount's boundary.
func linkProbes(c *client) {
	var errs []error
	node := func(names ...string) uint64 {
		e, err := c.walk(names...)
		errs = append(errs, err)
		return e.node
	}
	readme, src, git, keys := node("README.md"), node("src"), node(".git"), node("keys")
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(c.out, "links fail %v\n", err)
		return
	}
	made := func(step string) func(p []byte, err error) (string, error) {
		return func(p []byte, err error) (string, error) {
			if err != nil {
				return "", err
			}
			e, err := decodeEntry(step, p)
			return fmt.Sprintf("node %d mode %o", e.node, e.mode), err
		}
	}
	c.probe("create-victim", func() (string, error) {
		p, err := c.call("create", fp.OpCreate, src, fp.CreateIn{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC, Mode: 0o644, Name: "fv-victim.txt"})
		if err != nil {
			return "", err
		}
		if len(p) < fp.EntryOutSize+fp.OpenOutSize {
			return "", errors.New("create: short reply")
		}
		e, _ := decodeEntry("create", p)
		fh := le.Uint64(p[fp.EntryOutSize:])
		defer c.release(e.node, fh)
		_, err = c.call("write", fp.OpWrite, e.node, fp.WriteIn{Fh: fh, Size: 7, Data: []byte("victim\n")})
		return fmt.Sprintf("node %d", e.node), err
	})
	link := func(name string, old, dir uint64, newName string) {
		c.probe(name, func() (string, error) {
			return made("link")(c.call("link", fp.OpLink, dir, fp.LinkIn{OldNodeID: old, Name: newName}))
		})
	}
	link("link-onto-env", readme, fp.RootID, ".env")
	link("link-onto-pem", readme, src, "x.pem")
	link("link-onto-gitconfig", readme, git, "config")
	link("link-forged-old", 1<<41, src, "fv-forged")
	rename := func(name string, dir uint64, oldName string, newDir uint64, newName string) {
		c.probe(name, func() (string, error) {
			_, err := c.call("rename", fp.OpRename, dir, fp.RenameIn{NewDir: newDir, OldName: oldName, NewName: newName})
			return "renamed", err
		})
	}
	rename("rename-onto-env", src, "fv-victim.txt", fp.RootID, ".env")
	rename("rename-onto-pem", src, "fv-victim.txt", keys, "deploy.pem")
	rename("rename-onto-gitconfig", src, "fv-victim.txt", git, "config")
	rename("rename-env-away", fp.RootID, ".env", src, "fv-stolen")
	rename("rename-gitconfig-away", git, "config", src, "fv-stolen")
	rename("rename-forged-dir", src, "fv-victim.txt", 1<<42, "x")
	c.probe("rename2-exchange-env", func() (string, error) {
		_, err := c.call("rename2", fp.OpRename2, src, fp.RenameIn{NewDir: fp.RootID, Flags: unix.RENAME_EXCHANGE, OldName: "fv-victim.txt", NewName: ".env"})
		return "exchanged", err
	})
	c.probe("stolen", func() (string, error) { return c.found("src", "fv-stolen") })

	for _, l := range [][2]string{{"fl-env", "../.env"}, {"fl-etc", "/etc/hostname"}, {"fl-up", "../../../../etc/hostname"},
		{"fl-git", "../.git"}, {"fl-root", "/"}, {"fl-pem", "../keys/deploy.pem"}} {
		c.probe("symlink-"+l[0], func() (string, error) {
			return made("symlink")(c.call("symlink", fp.OpSymlink, src, fp.SymlinkIn{Name: l[0], Target: l[1]}))
		})
		c.probe("via-"+l[0], func() (string, error) { return c.readFile("src", l[0]) })
	}
	c.probe("through-fl-git", func() (string, error) { return c.found("src", "fl-git", "config") })
	c.probe("through-fl-root", func() (string, error) { return c.found("src", "fl-root", "etc", "hostname") })
	c.probe("through-fl-up", func() (string, error) { return c.found("src", "fl-up", "passwd") })

	mknod := func(name string, dir uint64, newName string, mode, rdev uint32) {
		c.probe(name, func() (string, error) {
			return made("mknod")(c.call("mknod", fp.OpMknod, dir, fp.MknodIn{Mode: mode, Rdev: rdev, Name: newName}))
		})
	}
	mknod("mknod-env", fp.RootID, ".env", unix.S_IFREG|0o644, 0)
	mknod("mknod-pem", src, "m.pem", unix.S_IFREG|0o644, 0)
	mknod("mknod-gitconfig", git, "config", unix.S_IFREG|0o644, 0)
	mknod("mknod-fifo", src, "fv-fifo", unix.S_IFIFO|0o644, 0)
	mknod("mknod-chr", src, "fv-mem", unix.S_IFCHR|0o644, uint32(unix.Mkdev(1, 1)))
	mknod("mknod-blk", src, "fv-sda", unix.S_IFBLK|0o644, uint32(unix.Mkdev(8, 0)))
	create := func(name string, dir uint64, newName string, flags uint32) {
		c.probe(name, func() (string, error) {
			p, err := c.call("create", fp.OpCreate, dir, fp.CreateIn{Flags: flags, Mode: 0o644, Name: newName})
			if err != nil {
				return "", err
			}
			if len(p) >= fp.EntryOutSize+fp.OpenOutSize {
				e, _ := decodeEntry("create", p)
				fh := le.Uint64(p[fp.EntryOutSize:])
				b, _ := c.read(e.node, fh, 4096)
				c.release(e.node, fh)
				return fmt.Sprintf("node %d read %q", e.node, b), nil
			}
			return "short reply", nil
		})
	}
	create("create-env", fp.RootID, ".env", unix.O_RDWR|unix.O_CREAT)
	create("create-env-trunc", fp.RootID, ".env", unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC)
	create("create-pem", src, "c.pem", unix.O_RDWR|unix.O_CREAT|unix.O_EXCL)
	create("create-gitconfig", git, "config", unix.O_RDWR|unix.O_CREAT)
	create("create-deploy-pem", keys, "deploy.pem", unix.O_RDWR|unix.O_CREAT)
	c.probe("mkdir-pem", func() (string, error) {
		return made("mkdir")(c.call("mkdir", fp.OpMkdir, fp.RootID, fp.MkdirIn{Mode: 0o755, Name: "d.pem"}))
	})
	c.probe("mkdir-env", func() (string, error) {
		return made("mkdir")(c.call("mkdir", fp.OpMkdir, fp.RootID, fp.MkdirIn{Mode: 0o755, Name: ".env"}))
	})
	c.probe("unlink-env", func() (string, error) {
		_, err := c.call("unlink", fp.OpUnlink, fp.RootID, fp.NameIn{Name: ".env"})
		return "unlinked", err
	})
	c.probe("unlink-gitconfig", func() (string, error) {
		_, err := c.call("unlink", fp.OpUnlink, git, fp.NameIn{Name: "config"})
		return "unlinked", err
	})
}

// readonlyProbes try every change under the read-only paths.
func readonlyProbes(c *client) {
	vendor, err1 := c.walk("vendor")
	lib, err2 := c.walk("vendor", "lib.go")
	tools, err3 := c.walk("tools")
	src, err4 := c.walk("src")
	readme, err5 := c.walk("README.md")
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		fmt.Fprintf(c.out, "readonly fail %v\n", err)
		return
	}
	openProbe := func(name string, flags uint32) {
		c.probe(name, func() (string, error) {
			fh, err := c.open(lib.node, flags)
			if err != nil {
				return "", err
			}
			c.release(lib.node, fh)
			return fmt.Sprintf("opened with %#x", flags), nil
		})
	}
	openProbe("ro-open-write", unix.O_WRONLY)
	openProbe("ro-open-rdwr", unix.O_RDWR)
	openProbe("ro-open-trunc", unix.O_RDONLY|unix.O_TRUNC)
	openProbe("ro-open-append", unix.O_WRONLY|unix.O_APPEND)
	c.probe("ro-write-rdonly-fh", func() (string, error) {
		fh, err := c.open(lib.node, unix.O_RDONLY)
		if err != nil {
			return "", err
		}
		defer c.release(lib.node, fh)
		_, err = c.call("write", fp.OpWrite, lib.node, fp.WriteIn{Fh: fh, Size: 5, Data: []byte("owned")})
		return "wrote", err
	})
	setattr := func(name string, node uint64, a fp.SetattrIn) {
		c.probe(name, func() (string, error) {
			_, err := c.call("setattr", fp.OpSetattr, node, a)
			return "set", err
		})
	}
	setattr("ro-truncate", lib.node, fp.SetattrIn{Valid: fp.SetattrSize, Size: 0})
	setattr("ro-chmod", lib.node, fp.SetattrIn{Valid: fp.SetattrMode, Mode: 0o777})
	setattr("ro-utimes", lib.node, fp.SetattrIn{Valid: fp.SetattrMtime | fp.SetattrAtime, Mtime: 1, Atime: 1})
	setattr("ro-chmod-dir", vendor.node, fp.SetattrIn{Valid: fp.SetattrMode, Mode: 0o777})
	c.probe("ro-create", func() (string, error) {
		_, err := c.call("create", fp.OpCreate, vendor.node, fp.CreateIn{Flags: unix.O_WRONLY | unix.O_CREAT, Mode: 0o644, Name: "new.go"})
		return "created", err
	})
	c.probe("ro-create-tools", func() (string, error) {
		_, err := c.call("create", fp.OpCreate, tools.node, fp.CreateIn{Flags: unix.O_WRONLY | unix.O_CREAT, Mode: 0o755, Name: "evil"})
		return "created", err
	})
	c.probe("ro-mknod", func() (string, error) {
		_, err := c.call("mknod", fp.OpMknod, vendor.node, fp.MknodIn{Mode: unix.S_IFREG | 0o644, Name: "n.go"})
		return "made", err
	})
	c.probe("ro-mkdir", func() (string, error) {
		_, err := c.call("mkdir", fp.OpMkdir, vendor.node, fp.MkdirIn{Mode: 0o755, Name: "dir"})
		return "made", err
	})
	c.probe("ro-symlink", func() (string, error) {
		_, err := c.call("symlink", fp.OpSymlink, vendor.node, fp.SymlinkIn{Name: "sym.go", Target: "lib.go"})
		return "made", err
	})
	c.probe("ro-unlink", func() (string, error) {
		_, err := c.call("unlink", fp.OpUnlink, vendor.node, fp.NameIn{Name: "lib.go"})
		return "unlinked", err
	})
	c.probe("ro-rmdir", func() (string, error) {
		_, err := c.call("rmdir", fp.OpRmdir, vendor.node, fp.NameIn{Name: "empty"})
		return "removed", err
	})
	c.probe("ro-link-in", func() (string, error) {
		_, err := c.call("link", fp.OpLink, vendor.node, fp.LinkIn{OldNodeID: readme.node, Name: "README.md"})
		return "linked", err
	})
	c.probe("ro-link-out", func() (string, error) {
		_, err := c.call("link", fp.OpLink, src.node, fp.LinkIn{OldNodeID: lib.node, Name: "fv-hard.go"})
		return "linked", err
	})
	rename := func(name string, dir uint64, oldName string, newDir uint64, newName string) {
		c.probe(name, func() (string, error) {
			_, err := c.call("rename", fp.OpRename, dir, fp.RenameIn{NewDir: newDir, OldName: oldName, NewName: newName})
			return "renamed", err
		})
	}
	rename("ro-mv-within", vendor.node, "lib.go", vendor.node, "moved.go")
	rename("ro-mv-out", vendor.node, "lib.go", src.node, "fv-moved.go")
	rename("ro-mv-in", src.node, "fv-victim.txt", vendor.node, "victim.txt")
	rename("ro-mv-dir", fp.RootID, "vendor", src.node, "fv-vendor")
	c.probe("ro-setxattr", func() (string, error) {
		_, err := c.call("setxattr", fp.OpSetxattr, lib.node, fp.SetxattrIn{Size: 1, Name: "user.x", Value: []byte("x")})
		return "set", err
	})
}

// protocolProbes send requests no kernel sends.
func protocolProbes(c *client) {
	c.probe("init-again", func() (string, error) {
		_, err := c.call("init", fp.OpInit, 0, fp.InitIn{Major: fp.Major, Minor: fp.Minor})
		return "initialised twice", err
	})
	c.probe("bad-len", func() (string, error) {
		c.unique++
		req := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpGetattr, Unique: c.unique, NodeID: fp.RootID}, fp.GetattrIn{})
		le.PutUint32(req, 4000)
		_, err := c.raw("getattr", req, c.unique)
		return "answered", err
	})
	for _, op := range []struct {
		name string
		op   fp.Opcode
	}{{"op-unknown", 99}, {"op-setupmapping", fp.OpSetupMap}, {"op-ioctl", fp.OpIoctl}, {"op-getlk", fp.OpGetlk}, {"op-bmap", fp.OpBmap}, {"op-copy-range", fp.OpCopyRange}} {
		c.probe(op.name, func() (string, error) {
			c.unique++
			req := fp.EncodeRequest(fp.InHeader{Opcode: op.op, Unique: c.unique, NodeID: fp.RootID}, nil)
			req = append(req, make([]byte, 64)...)
			le.PutUint32(req, uint32(len(req)))
			_, err := c.raw("op", req, c.unique)
			return "answered", err
		})
	}
	c.probe("read-huge", func() (string, error) {
		e, err := c.walk("README.md")
		if err != nil {
			return "", err
		}
		fh, err := c.open(e.node, unix.O_RDONLY)
		if err != nil {
			return "", err
		}
		defer c.release(e.node, fh)
		_, err = c.read(e.node, fh, 1<<31)
		return "read", err
	})
	c.probe("batch-forget-lie", func() (string, error) {
		c.unique++
		bf := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpBatchForget, Unique: c.unique}, fp.BatchForgetIn{Forgets: []fp.ForgetOne{{NodeID: 1, Nlookup: 1}}})
		le.PutUint32(bf[fp.InHeaderSize:], 1<<31)
		if err := c.d.hiprio([][]byte{bf}); err != nil {
			return "", err
		}
		return "root answers", c.alive()
	})
	// One request in four readable buffers, one of a single byte, on
	// pages apart: the host joins them.
	c.probe("split-request", func() (string, error) {
		d := c.d
		c.unique++
		req := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpGetattr, Unique: c.unique, NodeID: fp.RootID}, fp.GetattrIn{})
		parts := [][]byte{req[:1], req[1:17], req[17:40], req[40:]}
		q := d.req
		for i, part := range parts {
			copy(d.mem.page(pSpare+i), part)
			q.setDesc(i, d.mem.addr(pSpare+i), uint32(len(part)), descNext, uint16(i+1))
		}
		clear(d.mem.mem[pReply*pageSize : (pReply+2)*pageSize])
		q.setDesc(4, d.mem.addr(pReply), pageSize, descWrite, 0)
		r, err := d.finish(0)
		if err != nil {
			return "", err
		}
		_, err = c.parse("getattr", r, c.unique)
		return "joined", err
	})
	c.probe("small-reply", func() (string, error) {
		d := c.d
		c.unique++
		req := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpGetattr, Unique: c.unique, NodeID: fp.RootID}, fp.GetattrIn{})
		copy(d.mem.page(pReq), req)
		d.req.setDesc(0, d.mem.addr(pReq), uint32(len(req)), descNext, 1)
		d.req.setDesc(1, d.mem.addr(pReply), 8, descWrite, 0)
		r, err := d.finish(0)
		return fmt.Sprintf("used length %d", len(r)), err
	})
	c.probe("no-reply-buffer", func() (string, error) {
		d := c.d
		c.unique++
		req := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpGetattr, Unique: c.unique, NodeID: fp.RootID}, fp.GetattrIn{})
		copy(d.mem.page(pReq), req)
		d.req.setDesc(0, d.mem.addr(pReq), uint32(len(req)), 0, 0)
		r, err := d.finish(0)
		return fmt.Sprintf("used length %d", len(r)), err
	})
}

// forgetStorm sends FORGETs of every node ID up to 512 and a
// BATCH_FORGET of 200 random ones on the high-priority queue; the root
// must stay, and README.md must be found again.
func forgetStorm(c *client) {
	c.probe("forget-storm", func() (string, error) {
		var reqs [][]byte
		sent := 0
		for id := uint64(0); id < 512; id++ {
			c.unique++
			reqs = append(reqs, fp.EncodeRequest(fp.InHeader{Opcode: fp.OpForget, Unique: c.unique, NodeID: id}, fp.ForgetIn{Nlookup: ^uint64(0)}))
			if len(reqs) == queueSize {
				if err := c.d.hiprio(reqs); err != nil {
					return "", err
				}
				sent += len(reqs)
				reqs = reqs[:0]
			}
		}
		var bf fp.BatchForgetIn
		for range 200 {
			bf.Forgets = append(bf.Forgets, fp.ForgetOne{NodeID: rand.Uint64N(1 << 12), Nlookup: rand.Uint64()})
		}
		c.unique++
		if err := c.d.hiprio([][]byte{fp.EncodeRequest(fp.InHeader{Opcode: fp.OpBatchForget, Unique: c.unique}, bf)}); err != nil {
			return "", err
		}
		if err := c.alive(); err != nil {
			return "", err
		}
		s, err := c.readFile("README.md")
		return fmt.Sprintf("%d forgets; the root answers; README.md %s", sent+200, s), err
	})
}

// queueProbes break the request queue in each way the host must
// survive, and after each say what the device does.
func queueProbes(c *client, only []string) {
	d := c.d
	page := func(i int) uint64 { return d.mem.addr(i) }
	q := d.req
	// header is a well-formed GETATTR of the root in pReq.
	header := func() uint32 {
		c.unique++
		req := fp.EncodeRequest(fp.InHeader{Opcode: fp.OpGetattr, Unique: c.unique, NodeID: fp.RootID}, fp.GetattrIn{})
		copy(d.mem.page(pReq), req)
		return uint32(len(req))
	}
	setTable := func(i int, addr uint64, length uint32, flags, next uint16) {
		t := d.mem.page(pTable)[16*i : 16*i+16]
		le.PutUint64(t[0:], addr)
		le.PutUint32(t[8:], length)
		le.PutUint16(t[12:], flags)
		le.PutUint16(t[14:], next)
	}
	type hostile struct {
		name string
		// init is how the queue is set up first (zero: well-formed).
		init setup
		// post writes and publishes the broken chain (nil: none; the
		// setup is the probe).
		post func()
	}
	single := func(addr uint64, length uint32, flags uint16) func() {
		return func() {
			q.setDesc(0, addr, length, flags, 0)
			q.add(0)
			q.publish()
		}
	}
	posted := func(first func()) func() {
		return func() {
			first()
			q.add(0)
			q.publish()
		}
	}
	probes := []hostile{
		{name: "vq-desc-outside", post: single(outsideRAM, 64, 0)},
		{name: "vq-desc-rom", post: single(romAddr, 64, 0)},
		{name: "vq-desc-wrap", post: posted(func() {
			n := header()
			q.setDesc(0, page(pReq), n, descNext, 1)
			q.setDesc(1, ^uint64(0)-pageSize+1, 2*pageSize, descWrite, 0)
		})},
		{name: "vq-huge-len", post: single(page(pReq), 0xffffffff, 0)},
		{name: "vq-huge-write", post: posted(func() {
			n := header()
			q.setDesc(0, page(pReq), n, descNext, 1)
			q.setDesc(1, page(pReply), 0xfffff000, descWrite, 0)
		})},
		{name: "vq-chain-too-big", post: posted(func() {
			// Five readable MiB, every one inside RAM: more than a
			// chain may hold. Nothing is written.
			for i := range 5 {
				q.setDesc(i, 1<<20, 1<<20, descNext, uint16(i+1))
			}
			q.setDesc(5, page(pReply), pageSize, descWrite, 0)
		})},
		{name: "vq-loop", post: posted(func() {
			n := header()
			q.setDesc(0, page(pReq), n, descNext, 1)
			q.setDesc(1, page(pReq), n, descNext, 0)
		})},
		{name: "vq-self-loop", post: posted(func() {
			n := header()
			q.setDesc(0, page(pReq), n, descNext, 0)
		})},
		{name: "vq-next-out-of-range", post: posted(func() {
			n := header()
			q.setDesc(0, page(pReq), n, descNext, 200)
		})},
		{name: "vq-head-out-of-range", post: func() {
			n := header()
			q.setDesc(0, page(pReq), n, 0, 0)
			q.add(9)
			q.publish()
		}},
		{name: "vq-read-after-write", post: posted(func() {
			n := header()
			q.setDesc(0, page(pReply), pageSize, descWrite|descNext, 1)
			q.setDesc(1, page(pReq), n, 0, 0)
		})},
		{name: "vq-avail-jump", post: func() {
			n := header()
			q.setDesc(0, page(pReq), n, 0, 0)
			for range queueSize {
				q.add(0)
			}
			q.setAvailIdx(q.availIdx + 1000)
		}},
		{name: "vq-indirect-unnegotiated", post: posted(func() {
			n := header()
			setTable(0, page(pReq), n, descNext, 1)
			setTable(1, page(pReply), pageSize, descWrite, 0)
			q.setDesc(0, page(pTable), 32, descIndirect, 0)
		})},
		{name: "vq-indirect-control", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			n := header()
			clear(d.mem.mem[pReply*pageSize : (pReply+2)*pageSize])
			setTable(0, page(pReq), n, descNext, 1)
			setTable(1, page(pReply), pageSize, descWrite, 0)
			q.setDesc(0, page(pTable), 32, descIndirect, 0)
		})},
		{name: "vq-indirect-nested", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			header()
			setTable(0, page(pTable)+256, 32, descIndirect, 0)
			q.setDesc(0, page(pTable), 16, descIndirect, 0)
		})},
		{name: "vq-indirect-outside", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			q.setDesc(0, outsideRAM, 32, descIndirect, 0)
		})},
		{name: "vq-indirect-huge", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			q.setDesc(0, page(pTable), 0xfffffff0, descIndirect, 0)
		})},
		{name: "vq-indirect-longer-than-queue", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			n := header()
			for i := range 9 {
				setTable(i, page(pReq), n, descNext, uint16(i+1))
			}
			q.setDesc(0, page(pTable), 16*9, descIndirect, 0)
		})},
		{name: "vq-indirect-odd-len", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			q.setDesc(0, page(pTable), 20, descIndirect, 0)
		})},
		{name: "vq-indirect-with-next", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			n := header()
			setTable(0, page(pReq), n, 0, 0)
			q.setDesc(0, page(pTable), 16, descIndirect|descNext, 1)
			q.setDesc(1, page(pReply), pageSize, descWrite, 0)
		})},
		{name: "vq-indirect-loop", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			n := header()
			setTable(0, page(pReq), n, descNext, 1)
			setTable(1, page(pReq), n, descNext, 0)
			q.setDesc(0, page(pTable), 32, descIndirect, 0)
		})},
		{name: "vq-indirect-after-head", init: setup{features: featVersion1 | featIndirect}, post: posted(func() {
			n := header()
			setTable(0, page(pReply), pageSize, descWrite, 0)
			q.setDesc(0, page(pReq), n, descNext, 1)
			q.setDesc(1, page(pTable), 16, descIndirect, 0)
		})},
		{name: "vq-used-outside", init: setup{usedAddr: outsideRAM}},
		{name: "vq-desc-table-outside", init: setup{descAddr: outsideRAM}},
		{name: "vq-used-rom", init: setup{usedAddr: romAddr}},
		{name: "vq-desc-table-rom", init: setup{descAddr: romAddr}},
		{name: "vq-desc-table-misaligned", init: setup{descAddr: page(pReqRing) + 8}},
		{name: "vq-avail-2-aligned", init: setup{availAddr: page(pReqRing) + availOff + 2}},
		{name: "vq-size-not-power-of-two", init: setup{size: 7}},
		{name: "vq-no-version1", init: setup{noFeatures: true}},
	}
	for _, h := range probes {
		if len(only) > 0 && !slices.Contains(only, h.name) {
			continue
		}
		if time.Since(started) > queueProbesTime {
			fmt.Fprintf(c.out, "%s fail out of time\n", h.name)
			continue
		}
		var notes []string
		if err := d.start(h.init); err != nil {
			notes = append(notes, "start: "+err.Error())
		}
		if h.post != nil {
			h.post()
			if id, n, ok := q.waitUsed(hostileWait); ok {
				notes = append(notes, fmt.Sprintf("chain returned (%d, %d bytes)", id, n))
				if n >= fp.OutHeaderSize {
					if _, errno, _, _ := fp.OutHeader(d.mem.mem[pReply*pageSize:]); errno == 0 {
						notes = append(notes, "reply ok")
					} else {
						notes = append(notes, fmt.Sprintf("reply errno %s", unix.ErrnoName(errno)))
					}
				}
			} else {
				notes = append(notes, "chain not returned")
			}
		}
		// A device that stopped the queue answers nothing: this
		// wait is shorter than a request's.
		d.wait = hostileWait
		if err := c.alive(); err == nil {
			notes = append(notes, "then: answers")
		} else {
			notes = append(notes, "then: "+err.Error())
		}
		d.wait = 0
		notes = append(notes, fmt.Sprintf("status %#x", d.status()))
		if err := d.start(setup{}); err != nil {
			notes = append(notes, "reset: start: "+err.Error())
		} else if err := c.alive(); err != nil {
			notes = append(notes, "reset: "+err.Error())
		} else {
			notes = append(notes, "reset: answers")
		}
		fmt.Fprintf(c.out, "%s %s\n", h.name, strings.Join(notes, "; "))
	}
	c.probe("final", func() (string, error) { return c.readFile("README.md") })
}
