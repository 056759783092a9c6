//go:build linux

package virtq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Descriptor flags, available ring flags and used ring flags (virtio 1.x,
// 2.7).
const (
	DescFNext     = 1
	DescFWrite    = 2
	DescFIndirect = 4

	AvailFNoInterrupt = 1
	UsedFNoNotify     = 1
)

// MaxSize is the largest queue size a split virtqueue may have.
const MaxSize = 32768

// descSize is the size of one descriptor in a table.
const descSize = 16

// ErrMalformed is wrapped by every error Pop returns for a ring the
// driver has broken.
var ErrMalformed = errors.New("virtq: malformed ring")

// Config locates a queue in guest memory and bounds what it accepts.
type Config struct {
	// Size is the number of entries the driver set (a power of two, at
	// most MaxSize).
	Size uint16
	// DescAddr, AvailAddr and UsedAddr are the guest-physical addresses
	// of the descriptor table (16-byte aligned), the available ring and
	// the used ring (4-byte aligned). The available ring must be 4-byte
	// aligned in this process's memory too (the spec asks for 2; drivers
	// put it right after the descriptor table, which is 16-byte aligned),
	// so its index can be loaded atomically.
	DescAddr, AvailAddr, UsedAddr uint64
	// LastAvail is the available ring index the device resumes from; the
	// used index starts at the same value (every chain taken before was
	// returned).
	LastAvail uint16
	// Indirect says whether VIRTIO_RING_F_INDIRECT_DESC was negotiated.
	Indirect bool
	// MaxChainBytes bounds the sum of a chain's buffer lengths; 0 means
	// no chain may hold any bytes.
	MaxChainBytes uint64
}

// Chain is one descriptor chain taken from the available ring. Readable
// holds the buffers the driver filled (the device reads them), in order;
// Writable those the device fills. The slices alias guest memory (see the
// package comment).
type Chain struct {
	Head               uint16
	Readable, Writable [][]byte
}

// Queue is one split virtqueue over guest memory.
type Queue struct {
	mem      *Memory
	size     uint16
	indirect bool
	maxBytes uint64

	desc  []byte // Size descriptors
	avail []byte // flags, idx, ring[Size]
	used  []byte // flags, idx, ring[Size] of (id, len)

	availWord *uint32 // avail flags (low half) and idx (high half)
	usedWord  *uint32 // used flags (low half) and idx (high half)

	lastAvail uint16 // owned by Pop
	usedIdx   uint16 // owned by Push
}

// New locates a queue in mem. The rings must lie inside memory, each
// within one region, at the alignments Config states.
func New(mem *Memory, cfg Config) (*Queue, error) {
	n := uint64(cfg.Size)
	if n == 0 || n > MaxSize || n&(n-1) != 0 {
		return nil, fmt.Errorf("virtq: queue size %d is not a power of two up to %d", cfg.Size, MaxSize)
	}
	if cfg.DescAddr%16 != 0 || cfg.AvailAddr%2 != 0 || cfg.UsedAddr%4 != 0 {
		return nil, fmt.Errorf("virtq: ring addresses %#x, %#x, %#x are misaligned", cfg.DescAddr, cfg.AvailAddr, cfg.UsedAddr)
	}
	desc, err := mem.Slice(cfg.DescAddr, descSize*n)
	if err != nil {
		return nil, fmt.Errorf("virtq: descriptor table: %w", err)
	}
	avail, err := mem.Slice(cfg.AvailAddr, 4+2*n)
	if err != nil {
		return nil, fmt.Errorf("virtq: available ring: %w", err)
	}
	used, err := mem.Slice(cfg.UsedAddr, 4+8*n)
	if err != nil {
		return nil, fmt.Errorf("virtq: used ring: %w", err)
	}
	if uintptr(unsafe.Pointer(&avail[0]))%4 != 0 || uintptr(unsafe.Pointer(&used[0]))%4 != 0 {
		return nil, fmt.Errorf("virtq: rings at %#x and %#x are not 4-byte aligned in this process", cfg.AvailAddr, cfg.UsedAddr)
	}
	return &Queue{
		mem:       mem,
		size:      cfg.Size,
		indirect:  cfg.Indirect,
		maxBytes:  cfg.MaxChainBytes,
		desc:      desc,
		avail:     avail,
		used:      used,
		availWord: (*uint32)(unsafe.Pointer(&avail[0])),
		usedWord:  (*uint32)(unsafe.Pointer(&used[0])),
		lastAvail: cfg.LastAvail,
		usedIdx:   cfg.LastAvail,
	}, nil
}

// Size returns the queue's size.
func (q *Queue) Size() uint16 { return q.size }

// LastAvail returns the index of the next available ring entry Pop will
// take. It must not be called concurrently with Pop.
func (q *Queue) LastAvail() uint16 { return q.lastAvail }

// UsedIdx returns the used index Push last published. It must not be
// called concurrently with Push.
func (q *Queue) UsedIdx() uint16 { return q.usedIdx }

// Pop returns the next available chain, or nil when the driver has made
// none available. An error means the ring is broken (see the package
// comment); the entry is not consumed.
func (q *Queue) Pop() (*Chain, error) {
	availIdx := uint16(atomic.LoadUint32(q.availWord) >> 16)
	pending := availIdx - q.lastAvail
	if pending == 0 {
		return nil, nil
	}
	if pending > q.size {
		return nil, fmt.Errorf("%w: available index %d is %d entries past %d, more than the queue size %d", ErrMalformed, availIdx, pending, q.lastAvail, q.size)
	}
	slot := uint64(q.lastAvail & (q.size - 1))
	head := binary.LittleEndian.Uint16(q.avail[4+2*slot:])
	c, err := q.walk(head)
	if err != nil {
		return nil, err
	}
	q.lastAvail++
	return c, nil
}

// desc is a descriptor copied out of guest memory.
type desc struct {
	addr  uint64
	len   uint32
	flags uint16
	next  uint16
}

// readDesc copies descriptor i of table (which holds at least i+1) once.
func readDesc(table []byte, i uint32) desc {
	var raw [descSize]byte
	copy(raw[:], table[descSize*uint64(i):])
	return desc{
		addr:  binary.LittleEndian.Uint64(raw[0:]),
		len:   binary.LittleEndian.Uint32(raw[8:]),
		flags: binary.LittleEndian.Uint16(raw[12:]),
		next:  binary.LittleEndian.Uint16(raw[14:]),
	}
}

// walk follows the chain that starts at head.
func (q *Queue) walk(head uint16) (*Chain, error) {
	c := &Chain{Head: head}
	table := q.desc
	entries := uint32(q.size) // entries in table; also the chain bound
	idx := uint32(head)
	inIndirect := false
	var total uint64
	for seen := uint32(0); ; {
		if idx >= entries {
			return nil, fmt.Errorf("%w: chain %d: descriptor index %d is past the table's %d entries", ErrMalformed, head, idx, entries)
		}
		seen++
		if seen > entries {
			return nil, fmt.Errorf("%w: chain %d is longer than its table's %d entries (a loop?)", ErrMalformed, head, entries)
		}
		d := readDesc(table, idx)
		if d.flags&DescFIndirect != 0 {
			switch {
			case !q.indirect:
				return nil, fmt.Errorf("%w: chain %d: indirect descriptor, but indirect descriptors were not negotiated", ErrMalformed, head)
			case inIndirect:
				return nil, fmt.Errorf("%w: chain %d: indirect descriptor inside an indirect table", ErrMalformed, head)
			case seen != 1:
				return nil, fmt.Errorf("%w: chain %d: indirect descriptor after the head", ErrMalformed, head)
			case d.flags&DescFNext != 0:
				return nil, fmt.Errorf("%w: chain %d: indirect descriptor with the next flag", ErrMalformed, head)
			case d.len == 0 || d.len%descSize != 0:
				return nil, fmt.Errorf("%w: chain %d: indirect table of %d bytes is not a non-zero multiple of %d", ErrMalformed, head, d.len, descSize)
			case d.len/descSize > uint32(q.size):
				return nil, fmt.Errorf("%w: chain %d: indirect table of %d entries is longer than the queue size %d", ErrMalformed, head, d.len/descSize, q.size)
			}
			t, err := q.mem.Slice(d.addr, uint64(d.len))
			if err != nil {
				return nil, fmt.Errorf("%w: chain %d: indirect table: %w", ErrMalformed, head, err)
			}
			table, entries, idx, seen, inIndirect = t, d.len/descSize, 0, 0, true
			continue
		}
		buf, err := q.mem.Slice(d.addr, uint64(d.len))
		if err != nil {
			return nil, fmt.Errorf("%w: chain %d: buffer: %w", ErrMalformed, head, err)
		}
		total += uint64(d.len) // at most 2^16 lengths of < 2^32: no overflow
		if total > q.maxBytes {
			return nil, fmt.Errorf("%w: chain %d holds more than %d bytes", ErrMalformed, head, q.maxBytes)
		}
		if d.flags&DescFWrite != 0 {
			c.Writable = append(c.Writable, buf)
		} else {
			if len(c.Writable) > 0 {
				return nil, fmt.Errorf("%w: chain %d: readable descriptor after a writable one", ErrMalformed, head)
			}
			c.Readable = append(c.Readable, buf)
		}
		if d.flags&DescFNext == 0 {
			return c, nil
		}
		idx = uint32(d.next)
	}
}

// Push returns the chain whose head is head to the driver, saying that
// the device wrote written bytes into its writable buffers, and publishes
// the new used index.
func (q *Queue) Push(head uint16, written uint32) error {
	if head >= q.size {
		return fmt.Errorf("virtq: pushed head %d is past the queue size %d", head, q.size)
	}
	slot := uint64(q.usedIdx & (q.size - 1))
	e := q.used[4+8*slot : 4+8*slot+8]
	binary.LittleEndian.PutUint32(e[0:], uint32(head))
	binary.LittleEndian.PutUint32(e[4:], written)
	q.usedIdx++
	// The element is written before the index that covers it; flags are
	// the device's and stay zero (kicks are never suppressed).
	atomic.StoreUint32(q.usedWord, uint32(q.usedIdx)<<16)
	return nil
}

// NeedNotify says whether the driver wants an interrupt for what Push
// published: whether it left VIRTQ_AVAIL_F_NO_INTERRUPT clear. Call it
// after Push, from the goroutine that pushes.
func (q *Queue) NeedNotify() bool {
	return atomic.LoadUint32(q.availWord)&AvailFNoInterrupt == 0
}
