//go:build linux

package virtqtest

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Layout says where a driver's queue and buffers live in guest memory.
type Layout struct {
	// Base is the guest-physical address of Mem[0].
	Base uint64
	// Size is the queue size.
	Size uint16
	// Ring is the guest address of the descriptor table; the available
	// ring follows it and the used ring follows that, 4-byte aligned
	// (what Linux does for a modern device).
	Ring uint64
	// Arena is the guest address of the buffer area: head h owns
	// AreaSize bytes at Arena+h*AreaSize for its buffers and its
	// indirect table.
	Arena    uint64
	AreaSize uint64
}

// Driver is the driver side of one split virtqueue.
type Driver struct {
	Mem []byte
	L   Layout

	Desc, Avail, Used uint64 // guest addresses of the rings

	free     []uint16 // free descriptor indices
	availIdx uint16
	lastUsed uint16
	inflight map[uint16]request
}

type request struct {
	descs    []uint16 // direct descriptors it holds
	writable [][2]uint64
}

// Completion is one used ring element.
type Completion struct {
	Head uint16
	Len  uint32
	// Data holds the bytes of the chain's writable buffers, up to Len.
	Data []byte
}

// NewDriver lays out a queue in mem as l says and zeroes its rings.
func NewDriver(mem []byte, l Layout) *Driver {
	n := uint64(l.Size)
	d := &Driver{Mem: mem, L: l, inflight: map[uint16]request{}}
	d.Desc = l.Ring
	d.Avail = d.Desc + 16*n
	d.Used = (d.Avail + 6 + 2*n + 3) &^ 3
	clear(d.bytes(d.Desc, d.Used+6+8*n-d.Desc))
	for i := range l.Size {
		d.free = append(d.free, i)
	}
	return d
}

// bytes returns guest memory at addr; it panics on a bad address, which
// is a bug in the test.
func (d *Driver) bytes(addr, n uint64) []byte {
	off := addr - d.L.Base
	return d.Mem[off : off+n]
}

// Write copies b to guest address addr.
func (d *Driver) Write(addr uint64, b []byte) { copy(d.bytes(addr, uint64(len(b))), b) }

// SetDesc writes descriptor i of the table at guest address table.
func (d *Driver) SetDesc(table uint64, i uint16, addr uint64, length uint32, flags, next uint16) {
	b := d.bytes(table+16*uint64(i), 16)
	binary.LittleEndian.PutUint64(b[0:], addr)
	binary.LittleEndian.PutUint32(b[8:], length)
	binary.LittleEndian.PutUint16(b[12:], flags)
	binary.LittleEndian.PutUint16(b[14:], next)
}

// SetAvailEntry writes head into the available ring's slot for index idx.
func (d *Driver) SetAvailEntry(idx, head uint16) {
	slot := uint64(idx & (d.L.Size - 1))
	binary.LittleEndian.PutUint16(d.bytes(d.Avail+4+2*slot, 2), head)
}

// SetAvailIdx publishes idx as the available index, keeping the flags.
func (d *Driver) SetAvailIdx(idx uint16) {
	w := (*uint32)(unsafe.Pointer(&d.bytes(d.Avail, 4)[0]))
	atomic.StoreUint32(w, atomic.LoadUint32(w)&0xffff|uint32(idx)<<16)
	d.availIdx = idx
}

// Resume sets both ring indices to idx, as for a queue that resumes
// where an earlier device left it.
func (d *Driver) Resume(idx uint16) {
	d.SetAvailIdx(idx)
	d.lastUsed = idx
	w := (*uint32)(unsafe.Pointer(&d.bytes(d.Used, 4)[0]))
	atomic.StoreUint32(w, uint32(idx)<<16)
}

// AvailIdx returns the available index the driver last published.
func (d *Driver) AvailIdx() uint16 { return d.availIdx }

// SetNoInterrupt sets or clears VIRTQ_AVAIL_F_NO_INTERRUPT.
func (d *Driver) SetNoInterrupt(on bool) {
	w := (*uint32)(unsafe.Pointer(&d.bytes(d.Avail, 4)[0]))
	v := atomic.LoadUint32(w) &^ 1
	if on {
		v |= 1
	}
	atomic.StoreUint32(w, v)
}

// UsedIdx loads the used index the device published.
func (d *Driver) UsedIdx() uint16 {
	w := (*uint32)(unsafe.Pointer(&d.bytes(d.Used, 4)[0]))
	return uint16(atomic.LoadUint32(w) >> 16)
}

// Add makes a request available: the readable buffers hold out, and
// writable buffers of the lengths in in follow. With indirect the chain
// is one descriptor pointing at a table in the head's area. It does not
// publish the available index unless publish is set (Publish does).
func (d *Driver) Add(out [][]byte, in []uint32, indirect, publish bool) (uint16, error) {
	total := len(out) + len(in)
	if total == 0 {
		return 0, fmt.Errorf("virtqtest: empty request")
	}
	need := total
	if indirect {
		need = 1
	}
	if len(d.free) < need {
		return 0, fmt.Errorf("virtqtest: %d descriptors free, %d needed", len(d.free), need)
	}
	descs := append([]uint16(nil), d.free[:need]...)
	d.free = d.free[need:]
	head := descs[0]
	area := d.L.Arena + uint64(head)*d.L.AreaSize
	pos := area
	var table uint64
	if indirect {
		table = pos
		pos += 16 * uint64(total)
	}
	req := request{descs: descs}
	for i := range total {
		var addr uint64
		var length uint32
		flags := uint16(0)
		if i < len(out) {
			addr, length = pos, uint32(len(out[i]))
			d.Write(addr, out[i])
		} else {
			addr, length = pos, in[i-len(out)]
			flags |= 2
			req.writable = append(req.writable, [2]uint64{addr, uint64(length)})
		}
		pos += (uint64(length) + 15) &^ 15
		if pos > area+d.L.AreaSize {
			return 0, fmt.Errorf("virtqtest: request of %d bytes does not fit an area of %d", pos-area, d.L.AreaSize)
		}
		if i+1 < total {
			flags |= 1
		}
		if indirect {
			d.SetDesc(table, uint16(i), addr, length, flags, uint16(i+1))
		} else {
			next := uint16(0)
			if i+1 < total {
				next = descs[i+1]
			}
			d.SetDesc(d.Desc, descs[i], addr, length, flags, next)
		}
	}
	if indirect {
		d.SetDesc(d.Desc, head, table, uint32(16*total), 4, 0)
	}
	d.inflight[head] = req
	d.SetAvailEntry(d.availIdx, head)
	d.availIdx++
	if publish {
		d.SetAvailIdx(d.availIdx)
	}
	return head, nil
}

// Publish stores the available index covering every added request.
func (d *Driver) Publish() { d.SetAvailIdx(d.availIdx) }

// Completions returns the used elements published since the last call
// and frees their descriptors. A used element naming no request in
// flight, or claiming more bytes than its chain could hold, is an error.
func (d *Driver) Completions() ([]Completion, error) {
	var out []Completion
	end := d.UsedIdx()
	for ; d.lastUsed != end; d.lastUsed++ {
		slot := uint64(d.lastUsed & (d.L.Size - 1))
		e := d.bytes(d.Used+4+8*slot, 8)
		head := binary.LittleEndian.Uint32(e[0:])
		length := binary.LittleEndian.Uint32(e[4:])
		req, ok := d.inflight[uint16(head)]
		if !ok || head >= uint32(d.L.Size) {
			return out, fmt.Errorf("virtqtest: used element %d names head %d, not in flight", d.lastUsed, head)
		}
		delete(d.inflight, uint16(head))
		d.free = append(d.free, req.descs...)
		var data []byte
		left := uint64(length)
		for _, w := range req.writable {
			n := min(left, w[1])
			data = append(data, d.bytes(w[0], n)...)
			left -= n
		}
		if left != 0 {
			return out, fmt.Errorf("virtqtest: used element for head %d claims %d bytes, more than its buffers hold", head, length)
		}
		out = append(out, Completion{Head: uint16(head), Len: length, Data: data})
	}
	return out, nil
}

// InFlight returns the number of requests added and not yet completed.
func (d *Driver) InFlight() int { return len(d.inflight) }
