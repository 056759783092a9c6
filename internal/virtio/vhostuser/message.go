//go:build linux

package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// Request types (docs/interop/vhost-user.rst, "Front-end message types").
const (
	reqGetFeatures         = 1
	reqSetFeatures         = 2
	reqSetOwner            = 3
	reqResetOwner          = 4
	reqSetMemTable         = 5
	reqSetLogBase          = 6
	reqSetLogFD            = 7
	reqSetVringNum         = 8
	reqSetVringAddr        = 9
	reqSetVringBase        = 10
	reqGetVringBase        = 11
	reqSetVringKick        = 12
	reqSetVringCall        = 13
	reqSetVringErr         = 14
	reqGetProtocolFeatures = 15
	reqSetProtocolFeatures = 16
	reqGetQueueNum         = 17
	reqSetVringEnable      = 18
	reqGetConfig           = 24
	reqSetConfig           = 25
)

var reqNames = map[uint32]string{
	reqGetFeatures: "GET_FEATURES", reqSetFeatures: "SET_FEATURES",
	reqSetOwner: "SET_OWNER", reqResetOwner: "RESET_OWNER",
	reqSetMemTable: "SET_MEM_TABLE", reqSetLogBase: "SET_LOG_BASE",
	reqSetLogFD: "SET_LOG_FD", reqSetVringNum: "SET_VRING_NUM",
	reqSetVringAddr: "SET_VRING_ADDR", reqSetVringBase: "SET_VRING_BASE",
	reqGetVringBase: "GET_VRING_BASE", reqSetVringKick: "SET_VRING_KICK",
	reqSetVringCall: "SET_VRING_CALL", reqSetVringErr: "SET_VRING_ERR",
	reqGetProtocolFeatures: "GET_PROTOCOL_FEATURES",
	reqSetProtocolFeatures: "SET_PROTOCOL_FEATURES",
	reqGetQueueNum:         "GET_QUEUE_NUM", reqSetVringEnable: "SET_VRING_ENABLE",
	reqGetConfig: "GET_CONFIG", reqSetConfig: "SET_CONFIG",
}

// RequestName returns the protocol's name for a request type
// ("SET_MEM_TABLE"), or "REQUEST_<n>" for one this package does not know.
func RequestName(req uint32) string {
	if n, ok := reqNames[req]; ok {
		return n
	}
	return fmt.Sprintf("REQUEST_%d", req)
}

// Header flags.
const (
	flagVersionMask = 0x3
	flagVersion     = 0x1
	flagReply       = 0x4
	flagNeedReply   = 0x8
)

// Feature bits (virtio and vhost-user).
const (
	// FeatureProtocolFeatures is VHOST_USER_F_PROTOCOL_FEATURES.
	FeatureProtocolFeatures = 1 << 30
	// FeatureIndirectDesc is VIRTIO_RING_F_INDIRECT_DESC.
	FeatureIndirectDesc = 1 << 28
	// FeatureVersion1 is VIRTIO_F_VERSION_1.
	FeatureVersion1 = 1 << 32

	// transportFeatures are the bits 24 to 40 the spec reserves for the
	// transport and the rings, and bit 30; Options.Features may not set
	// them.
	transportFeatures = (1<<41 - 1) &^ (1<<24 - 1)
)

// Protocol feature bits.
const (
	protoMQ       = 1 << 0
	protoReplyAck = 1 << 3
	// offeredProtocolFeatures is what the backend offers: several queues
	// and acknowledged requests. Nothing that would give the front-end a
	// channel back (SLAVE_REQ / BACKEND_REQ), shared memory (DAX,
	// inflight), logging or config space.
	offeredProtocolFeatures = protoMQ | protoReplyAck
)

const (
	headerSize = 12
	// maxPayload bounds a message's payload before anything is
	// allocated; the largest the backend accepts is a memory table of
	// maxRegions regions (264 bytes).
	maxPayload = 512
	// maxRegions is VHOST_MEMORY_BASELINE_NREGIONS, what QEMU sends at
	// most without CONFIGURE_MEM_SLOTS (not offered).
	maxRegions = 8
	// maxFDs is the most descriptors one message may carry.
	maxFDs = maxRegions

	vringIndexMask = 0xff
	vringNoFDMask  = 0x100
	vringFLog      = 1 << 0 // VHOST_VRING_F_LOG in SET_VRING_ADDR's flags
)

// message is one request with the descriptors that came with it. The
// receiver owns fds and must close those it does not keep.
type message struct {
	req     uint32
	flags   uint32
	payload []byte
	fds     []int
}

func (m *message) needReply() bool { return m.flags&flagNeedReply != 0 }

// closeFDs closes every descriptor still held (not set to -1).
func (m *message) closeFDs() {
	for i, fd := range m.fds {
		if fd >= 0 {
			unix.Close(fd)
			m.fds[i] = -1
		}
	}
}

// takeFD hands the message's only descriptor to the caller.
func (m *message) takeFD() int {
	fd := m.fds[0]
	m.fds[0] = -1
	return fd
}

// errProtocol is wrapped by errors for malformed messages.
var errProtocol = errors.New("vhost-user: protocol error")

// decodeHeader checks a message header.
func decodeHeader(h []byte) (req, flags, size uint32, err error) {
	req = binary.LittleEndian.Uint32(h[0:])
	flags = binary.LittleEndian.Uint32(h[4:])
	size = binary.LittleEndian.Uint32(h[8:])
	if flags&flagVersionMask != flagVersion {
		return 0, 0, 0, fmt.Errorf("%w: %s: version %d, want %d", errProtocol, RequestName(req), flags&flagVersionMask, flagVersion)
	}
	if flags&flagReply != 0 {
		return 0, 0, 0, fmt.Errorf("%w: %s: a reply where a request was due", errProtocol, RequestName(req))
	}
	if size > maxPayload {
		return 0, 0, 0, fmt.Errorf("%w: %s: payload of %d bytes is over %d", errProtocol, RequestName(req), size, maxPayload)
	}
	return req, flags, size, nil
}

// readMessage reads one message from c with the descriptors sent with
// it. It returns io.EOF when the connection ends between messages.
func readMessage(c *net.UnixConn) (*message, error) {
	m := &message{}
	var hdr [headerSize]byte
	if err := readFull(c, hdr[:], m, true); err != nil {
		m.closeFDs()
		return nil, err
	}
	req, flags, size, err := decodeHeader(hdr[:])
	if err != nil {
		m.closeFDs()
		return nil, err
	}
	m.req, m.flags = req, flags
	m.payload = make([]byte, size)
	if err := readFull(c, m.payload, m, false); err != nil {
		m.closeFDs()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return m, nil
}

// readFull fills b from c, collecting descriptors into m. At the start of
// a message (first) a clean end of stream is io.EOF.
func readFull(c *net.UnixConn, b []byte, m *message, first bool) error {
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	for got := 0; got < len(b); {
		n, oobn, flags, _, err := c.ReadMsgUnix(b[got:], oob)
		if oobn > 0 {
			if perr := m.addFDs(oob[:oobn]); perr != nil {
				return perr
			}
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return fmt.Errorf("%w: more descriptors than %d with one message", errProtocol, maxFDs)
		}
		got += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				if got == 0 && first {
					return io.EOF
				}
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if n == 0 {
			if got == 0 && first {
				return io.EOF
			}
			return io.ErrUnexpectedEOF
		}
	}
	return nil
}

// addFDs takes the descriptors out of control messages.
func (m *message) addFDs(oob []byte) error {
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("%w: control message: %w", errProtocol, err)
	}
	for _, cm := range cmsgs {
		if cm.Header.Level != unix.SOL_SOCKET || cm.Header.Type != unix.SCM_RIGHTS {
			continue
		}
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			return fmt.Errorf("%w: control message: %w", errProtocol, err)
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
		}
		m.fds = append(m.fds, fds...)
	}
	if len(m.fds) > maxFDs {
		return fmt.Errorf("%w: %d descriptors with one message, more than %d", errProtocol, len(m.fds), maxFDs)
	}
	return nil
}

// writeReply sends the reply to req with payload.
func writeReply(c *net.UnixConn, req uint32, payload []byte) error {
	b := make([]byte, headerSize+len(payload))
	binary.LittleEndian.PutUint32(b[0:], req)
	binary.LittleEndian.PutUint32(b[4:], flagVersion|flagReply)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	copy(b[headerSize:], payload)
	_, err := c.Write(b)
	return err
}

func u64Payload(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// decodeU64 decodes a payload that is one 64-bit number.
func decodeU64(m *message) (uint64, error) {
	if len(m.payload) != 8 {
		return 0, fmt.Errorf("%w: %s: payload of %d bytes, want 8", errProtocol, RequestName(m.req), len(m.payload))
	}
	return binary.LittleEndian.Uint64(m.payload), nil
}

// vringState is struct vhost_vring_state.
type vringState struct{ index, num uint32 }

func decodeVringState(m *message) (vringState, error) {
	if len(m.payload) != 8 {
		return vringState{}, fmt.Errorf("%w: %s: payload of %d bytes, want 8", errProtocol, RequestName(m.req), len(m.payload))
	}
	return vringState{binary.LittleEndian.Uint32(m.payload[0:]), binary.LittleEndian.Uint32(m.payload[4:])}, nil
}

func (s vringState) payload() []byte {
	b := binary.LittleEndian.AppendUint32(nil, s.index)
	return binary.LittleEndian.AppendUint32(b, s.num)
}

// vringAddr is struct vhost_vring_addr: the rings' addresses in the
// front-end's virtual address space.
type vringAddr struct {
	index, flags            uint32
	desc, used, avail, logA uint64
}

func decodeVringAddr(m *message) (vringAddr, error) {
	if len(m.payload) != 40 {
		return vringAddr{}, fmt.Errorf("%w: %s: payload of %d bytes, want 40", errProtocol, RequestName(m.req), len(m.payload))
	}
	p := m.payload
	return vringAddr{
		index: binary.LittleEndian.Uint32(p[0:]),
		flags: binary.LittleEndian.Uint32(p[4:]),
		desc:  binary.LittleEndian.Uint64(p[8:]),
		used:  binary.LittleEndian.Uint64(p[16:]),
		avail: binary.LittleEndian.Uint64(p[24:]),
		logA:  binary.LittleEndian.Uint64(p[32:]),
	}, nil
}

// memRegion is struct vhost_user_memory_region.
type memRegion struct {
	guestAddr, size, userAddr, mmapOffset uint64
}

const memRegionSize = 32

// decodeMemTable decodes struct vhost_user_memory. The payload may be
// longer than the regions it counts (up to the fixed array of
// maxRegions), never shorter.
func decodeMemTable(m *message) ([]memRegion, error) {
	p := m.payload
	if len(p) < 8 {
		return nil, fmt.Errorf("%w: %s: payload of %d bytes", errProtocol, RequestName(m.req), len(p))
	}
	n := binary.LittleEndian.Uint32(p[0:])
	if n == 0 || n > maxRegions {
		return nil, fmt.Errorf("%w: %s: %d regions, want 1 to %d", errProtocol, RequestName(m.req), n, maxRegions)
	}
	if uint64(len(p)) < 8+memRegionSize*uint64(n) {
		return nil, fmt.Errorf("%w: %s: payload of %d bytes for %d regions", errProtocol, RequestName(m.req), len(p), n)
	}
	rs := make([]memRegion, n)
	for i := range rs {
		o := 8 + memRegionSize*i
		rs[i] = memRegion{
			guestAddr:  binary.LittleEndian.Uint64(p[o:]),
			size:       binary.LittleEndian.Uint64(p[o+8:]),
			userAddr:   binary.LittleEndian.Uint64(p[o+16:]),
			mmapOffset: binary.LittleEndian.Uint64(p[o+24:]),
		}
	}
	return rs, nil
}
