//go:build linux

package vhostuser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

// Device handles the requests a queue carries.
type Device interface {
	// Handle serves one chain taken from queue q and returns how many
	// bytes it wrote into c.Writable (counted from the first writable
	// buffer on; more than they hold is cut to what they hold). It may
	// block; it is called from several goroutines at once, up to
	// Options.InFlight per queue; a panic in it ends the process. The
	// chain's slices are guest memory:
	// Handle must not keep them, or anything pointing into them, after it
	// returns, and must read each field it checks only once.
	Handle(q int, c *virtq.Chain) (written uint32)
}

// Options configure Serve.
type Options struct {
	// Queues is the number of virtqueues the device has (for virtiofs:
	// one high-priority queue and the request queues); GET_QUEUE_NUM
	// reports it and higher ring indices are refused. 0 means 2. It must
	// be 1 + the device's num-request-queues: QEMU 7.2 does not compare
	// GET_QUEUE_NUM's answer with its queue count for vhost-user-fs, so a
	// smaller Queues fails at realize when a ring past it is named.
	Queues int
	// Features are the device's own feature bits, offered along with
	// VIRTIO_F_VERSION_1, VIRTIO_RING_F_INDIRECT_DESC and
	// VHOST_USER_F_PROTOCOL_FEATURES. Bits 24 to 40 (transport and ring
	// features) are refused.
	Features uint64
	// MaxChainBytes bounds the bytes one chain may hold; 0 means 4 MiB.
	MaxChainBytes int
	// InFlight bounds the chains handled at once per queue; 0 means 16.
	InFlight int
	// Logger receives the requests (debug) and queue failures (warn);
	// nil discards.
	Logger *slog.Logger
}

const (
	maxQueues            = 256 // the index field of a vring message is 8 bits
	defaultMaxChainBytes = 4 << 20
	defaultInFlight      = 16
)

// Serve runs the backend on conn, a connected unix stream socket whose
// other end is the front-end (QEMU's vhost-user chardev), until the
// front-end closes it (nil) or ctx ends (ctx.Err()). It returns an error
// for a request it cannot honour — malformed, unknown, or refused — after
// sending a failure acknowledgement when one was asked for; the
// front-end treats the closed connection as a failed device.
//
// When it returns an error it shuts conn down both ways first, so that
// the front-end sees the connection end rather than wait for a reply
// that will not come: QEMU waits for some replies (GET_VRING_BASE, an
// acknowledged SET_MEM_TABLE) on a vCPU thread holding its global lock,
// so a backend that stopped reading would freeze the whole machine.
//
// Before it returns, every queue is stopped, every chain handed to dev
// has come back (so Serve waits for blocked handlers), every mapping is
// released and every descriptor received is closed. Serve does not close
// conn.
func Serve(ctx context.Context, conn *net.UnixConn, dev Device, opts Options) (err error) {
	if opts.Queues == 0 {
		opts.Queues = 2
	}
	if opts.Queues < 1 || opts.Queues > maxQueues {
		return fmt.Errorf("vhost-user: %d queues, want 1 to %d", opts.Queues, maxQueues)
	}
	if opts.Features&transportFeatures != 0 {
		return fmt.Errorf("vhost-user: device features %#x include transport bits", opts.Features)
	}
	if opts.MaxChainBytes == 0 {
		opts.MaxChainBytes = defaultMaxChainBytes
	}
	if opts.InFlight == 0 {
		opts.InFlight = defaultInFlight
	}
	if opts.MaxChainBytes < 0 || opts.InFlight < 0 {
		return fmt.Errorf("vhost-user: negative MaxChainBytes or InFlight")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &backend{
		conn:    conn,
		dev:     dev,
		opts:    opts,
		log:     log,
		offered: FeatureVersion1 | FeatureIndirectDesc | FeatureProtocolFeatures | opts.Features,
		vrings:  make([]*vring, opts.Queues),
	}
	for i := range b.vrings {
		b.vrings[i] = newVring()
	}
	defer b.shutdown()
	defer func() {
		if err != nil && ctx.Err() == nil {
			conn.CloseRead()
			conn.CloseWrite()
		}
	}()

	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		m, err := readMessage(conn)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("vhost-user: reading a request: %w", err)
		}
		err = b.dispatch(m)
		m.closeFDs()
		if err != nil {
			return err
		}
	}
}

// backend is the state one connection negotiates. Only Serve's goroutine
// touches it; the workers have their own.
type backend struct {
	conn *net.UnixConn
	dev  Device
	opts Options
	log  *slog.Logger

	offered  uint64 // virtio features offered
	acked    uint64 // SET_FEATURES
	protocol uint64 // SET_PROTOCOL_FEATURES
	owner    bool
	mem      *guestMemory
	vrings   []*vring
}

// vring is what the front-end set for one queue.
type vring struct {
	num               uint16 // 0: not set
	addrSet           bool
	desc, avail, used uint64 // front-end virtual addresses
	base              uint16
	kick, call, errFD int  // -1: none
	kicked            bool // SET_VRING_KICK came since the last stop
	enabled           bool
	w                 *worker // non-nil while started
}

func newVring() *vring { return &vring{kick: -1, call: -1, errFD: -1} }

// dispatch handles one request and sends its reply.
func (b *backend) dispatch(m *message) error {
	b.log.Debug("vhost-user: request", "req", RequestName(m.req), "flags", m.flags, "size", len(m.payload), "fds", len(m.fds), "payload", fmt.Sprintf("%x", m.payload[:min(len(m.payload), 48)]))
	reply, err := b.handle(m)
	if err != nil {
		b.log.Warn("vhost-user: request failed", "req", RequestName(m.req), "err", err)
	}
	switch {
	case reply != nil && err == nil:
		if werr := writeReply(b.conn, m.req, reply); werr != nil {
			return fmt.Errorf("vhost-user: replying to %s: %w", RequestName(m.req), werr)
		}
	case m.needReply() && b.protocol&protoReplyAck != 0 && !hasReply(m.req):
		status := uint64(0)
		if err != nil {
			status = 1
		}
		if werr := writeReply(b.conn, m.req, u64Payload(status)); werr != nil && err == nil {
			return fmt.Errorf("vhost-user: acknowledging %s: %w", RequestName(m.req), werr)
		}
	}
	return err
}

// hasReply says whether a request is answered whatever its flags.
func hasReply(req uint32) bool {
	switch req {
	case reqGetFeatures, reqGetProtocolFeatures, reqGetQueueNum, reqGetVringBase:
		return true
	}
	return false
}

// wantFDs checks the number of descriptors a request came with.
func wantFDs(m *message, n int) error {
	if len(m.fds) != n {
		return fmt.Errorf("%w: %s with %d descriptors, want %d", errProtocol, RequestName(m.req), len(m.fds), n)
	}
	return nil
}

func (b *backend) handle(m *message) ([]byte, error) {
	switch m.req {
	case reqSetMemTable, reqSetVringKick, reqSetVringCall, reqSetVringErr:
	default:
		if err := wantFDs(m, 0); err != nil {
			return nil, err
		}
	}
	switch m.req {
	case reqGetFeatures:
		return u64Payload(b.offered), wantLen(m, 0)
	case reqSetFeatures:
		v, err := decodeU64(m)
		if err != nil {
			return nil, err
		}
		return nil, b.setFeatures(v)
	case reqGetProtocolFeatures:
		return u64Payload(offeredProtocolFeatures), wantLen(m, 0)
	case reqSetProtocolFeatures:
		v, err := decodeU64(m)
		if err != nil {
			return nil, err
		}
		if v&^offeredProtocolFeatures != 0 {
			return nil, fmt.Errorf("vhost-user: protocol features %#x were not offered (%#x)", v, uint64(offeredProtocolFeatures))
		}
		b.protocol = v
		return nil, nil
	case reqSetOwner:
		b.owner = true
		return nil, wantLen(m, 0)
	case reqResetOwner:
		b.reset()
		return nil, nil
	case reqGetQueueNum:
		return u64Payload(uint64(b.opts.Queues)), wantLen(m, 0)
	case reqSetMemTable:
		return nil, b.setMemTable(m)
	case reqSetVringNum:
		return nil, b.setVringNum(m)
	case reqSetVringAddr:
		return nil, b.setVringAddr(m)
	case reqSetVringBase:
		return nil, b.setVringBase(m)
	case reqGetVringBase:
		return b.getVringBase(m)
	case reqSetVringKick, reqSetVringCall, reqSetVringErr:
		return nil, b.setVringFD(m)
	case reqSetVringEnable:
		return nil, b.setVringEnable(m)
	}
	return nil, fmt.Errorf("vhost-user: unsupported request %s (flags %#x, %d bytes)", RequestName(m.req), m.flags, len(m.payload))
}

func wantLen(m *message, n int) error {
	if len(m.payload) != n {
		return fmt.Errorf("%w: %s: payload of %d bytes, want %d", errProtocol, RequestName(m.req), len(m.payload), n)
	}
	return nil
}

func (b *backend) running() bool {
	for _, vr := range b.vrings {
		if vr.w != nil {
			return true
		}
	}
	return false
}

func (b *backend) setFeatures(v uint64) error {
	if v&^b.offered != 0 {
		return fmt.Errorf("vhost-user: features %#x were not offered (%#x)", v, b.offered)
	}
	if b.running() && v != b.acked {
		return fmt.Errorf("vhost-user: features changed from %#x to %#x while queues run", b.acked, v)
	}
	b.acked = v
	// Without VHOST_USER_F_PROTOCOL_FEATURES rings start enabled.
	if v&FeatureProtocolFeatures == 0 {
		for i, vr := range b.vrings {
			vr.enabled = true
			if err := b.maybeStart(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// vring returns the ring named by an index field.
func (b *backend) vring(m *message, index uint64) (int, *vring, error) {
	if index >= uint64(len(b.vrings)) {
		return 0, nil, fmt.Errorf("vhost-user: %s for queue %d of %d", RequestName(m.req), index, len(b.vrings))
	}
	return int(index), b.vrings[index], nil
}

func (b *backend) setVringNum(m *message) error {
	s, err := decodeVringState(m)
	if err != nil {
		return err
	}
	_, vr, err := b.vring(m, uint64(s.index))
	if err != nil {
		return err
	}
	if vr.w != nil {
		return fmt.Errorf("vhost-user: SET_VRING_NUM for running queue %d", s.index)
	}
	// A size that is not a power of two is the guest's (QEMU passes
	// on what the driver wrote): the queue is refused when it would
	// start, not the connection.
	if s.num == 0 || s.num > virtq.MaxSize {
		return fmt.Errorf("vhost-user: queue %d size %d is not 1 to %d", s.index, s.num, virtq.MaxSize)
	}
	vr.num = uint16(s.num)
	return nil
}

func (b *backend) setVringAddr(m *message) error {
	a, err := decodeVringAddr(m)
	if err != nil {
		return err
	}
	_, vr, err := b.vring(m, uint64(a.index))
	if err != nil {
		return err
	}
	if vr.w != nil {
		return fmt.Errorf("vhost-user: SET_VRING_ADDR for running queue %d", a.index)
	}
	if a.flags&vringFLog != 0 || a.flags&^vringFLog != 0 {
		return fmt.Errorf("vhost-user: SET_VRING_ADDR flags %#x (logging is not supported)", a.flags)
	}
	vr.desc, vr.avail, vr.used, vr.addrSet = a.desc, a.avail, a.used, true
	return nil
}

func (b *backend) setVringBase(m *message) error {
	s, err := decodeVringState(m)
	if err != nil {
		return err
	}
	_, vr, err := b.vring(m, uint64(s.index))
	if err != nil {
		return err
	}
	if vr.w != nil {
		return fmt.Errorf("vhost-user: SET_VRING_BASE for running queue %d", s.index)
	}
	if s.num > 0xffff {
		return fmt.Errorf("vhost-user: queue %d base %d is past 16 bits", s.index, s.num)
	}
	vr.base = uint16(s.num)
	return nil
}

// getVringBase stops the queue, waiting for its chains in flight, and
// returns where it stopped.
func (b *backend) getVringBase(m *message) ([]byte, error) {
	s, err := decodeVringState(m)
	if err != nil {
		return nil, err
	}
	_, vr, err := b.vring(m, uint64(s.index))
	if err != nil {
		return nil, err
	}
	b.stopRing(vr)
	vr.kicked = false
	return vringState{index: s.index, num: uint32(vr.base)}.payload(), nil
}

// stopRing stops a running queue and keeps the index it stopped at.
func (b *backend) stopRing(vr *vring) {
	if vr.w == nil {
		return
	}
	vr.base = vr.w.halt()
	vr.w = nil
}

func (b *backend) setVringFD(m *message) error {
	v, err := decodeU64(m)
	if err != nil {
		return err
	}
	if v&^(vringIndexMask|vringNoFDMask) != 0 {
		return fmt.Errorf("%w: %s: payload %#x has unknown bits", errProtocol, RequestName(m.req), v)
	}
	i, vr, err := b.vring(m, v&vringIndexMask)
	if err != nil {
		return err
	}
	noFD := v&vringNoFDMask != 0
	want := 1
	if noFD {
		want = 0
	}
	if err := wantFDs(m, want); err != nil {
		return err
	}
	fd := -1
	if !noFD {
		fd = m.takeFD()
	}
	switch m.req {
	case reqSetVringKick:
		if noFD {
			return fmt.Errorf("vhost-user: queue %d: polling without a kick descriptor is not supported", i)
		}
		b.stopRing(vr)
		closeFD(vr.kick)
		vr.kick, vr.kicked = fd, true
		return b.maybeStart(i)
	case reqSetVringCall:
		old := vr.call
		if vr.w != nil {
			old = vr.w.setCall(fd)
		}
		vr.call = fd
		closeFD(old)
	case reqSetVringErr:
		old := vr.errFD
		if vr.w != nil {
			old = vr.w.setErr(fd)
		}
		vr.errFD = fd
		closeFD(old)
	}
	return nil
}

func (b *backend) setVringEnable(m *message) error {
	s, err := decodeVringState(m)
	if err != nil {
		return err
	}
	i, vr, err := b.vring(m, uint64(s.index))
	if err != nil {
		return err
	}
	switch s.num {
	case 0:
		vr.enabled = false
		b.stopRing(vr)
		return nil
	case 1:
		vr.enabled = true
		return b.maybeStart(i)
	}
	return fmt.Errorf("vhost-user: SET_VRING_ENABLE for queue %d with %d", s.index, s.num)
}

// maybeStart starts queue i if everything it needs is set. A queue the
// guest laid out so that it cannot be served — features without
// VIRTIO_F_VERSION_1, a size that is not a power of two, rings that are
// misaligned or outside the memory table (QEMU hands over its bounce
// buffer for a ring the guest put outside RAM) — is not started: that
// is logged and signalled on its error descriptor, as a ring broken
// while it runs is, and the connection goes on; the guest must reset
// the device. Only a failure of this process is an error.
func (b *backend) maybeStart(i int) error {
	vr := b.vrings[i]
	if vr.w != nil || !vr.kicked || !vr.enabled || !vr.addrSet || vr.num == 0 || b.mem == nil {
		return nil
	}
	q, err := b.newQueue(i)
	if err != nil {
		b.log.Warn("vhost-user: queue not started", "queue", i, "err", err)
		if vr.errFD >= 0 {
			signal(vr.errFD)
		}
		return nil
	}
	w, err := startWorker(i, q, b.dev, b.log, vr.kick, vr.call, vr.errFD, b.opts.InFlight)
	if err != nil {
		return err
	}
	vr.w = w
	b.log.Debug("vhost-user: queue started", "queue", i, "size", vr.num, "base", vr.base)
	return nil
}

// newQueue locates queue i's rings in guest memory.
func (b *backend) newQueue(i int) (*virtq.Queue, error) {
	vr := b.vrings[i]
	if b.acked&FeatureVersion1 == 0 {
		return nil, fmt.Errorf("vhost-user: queue %d: features %#x lack VIRTIO_F_VERSION_1", i, b.acked)
	}
	n := uint64(vr.num)
	desc, err := b.mem.userToGuest(vr.desc, 16*n)
	if err != nil {
		return nil, fmt.Errorf("vhost-user: queue %d descriptor table: %w", i, err)
	}
	avail, err := b.mem.userToGuest(vr.avail, 4+2*n)
	if err != nil {
		return nil, fmt.Errorf("vhost-user: queue %d available ring: %w", i, err)
	}
	used, err := b.mem.userToGuest(vr.used, 4+8*n)
	if err != nil {
		return nil, fmt.Errorf("vhost-user: queue %d used ring: %w", i, err)
	}
	q, err := virtq.New(b.mem.mem, virtq.Config{
		Size:          vr.num,
		DescAddr:      desc,
		AvailAddr:     avail,
		UsedAddr:      used,
		LastAvail:     vr.base,
		Indirect:      b.acked&FeatureIndirectDesc != 0,
		MaxChainBytes: uint64(b.opts.MaxChainBytes),
	})
	if err != nil {
		return nil, fmt.Errorf("vhost-user: queue %d: %w", i, err)
	}
	return q, nil
}

func (b *backend) setMemTable(m *message) error {
	rs, err := decodeMemTable(m)
	if err != nil {
		return err
	}
	mem, err := mapMemory(rs, m.fds)
	if err != nil {
		return err
	}
	// The running queues point into the old table: stop them, swap the
	// table and start them again where they stopped.
	var restart []int
	for i, vr := range b.vrings {
		if vr.w != nil {
			b.stopRing(vr)
			restart = append(restart, i)
		}
	}
	if b.mem != nil {
		b.mem.unmap()
	}
	b.mem = mem
	var errs []error
	for _, i := range restart {
		errs = append(errs, b.maybeStart(i))
	}
	return errors.Join(errs...)
}

// reset stops every queue and forgets what was set, as a new connection
// would start.
func (b *backend) reset() {
	for i, vr := range b.vrings {
		b.stopRing(vr)
		closeFD(vr.kick)
		closeFD(vr.call)
		closeFD(vr.errFD)
		b.vrings[i] = newVring()
	}
	if b.mem != nil {
		b.mem.unmap()
		b.mem = nil
	}
	b.acked = 0
	b.owner = false
}

func (b *backend) shutdown() { b.reset() }

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
