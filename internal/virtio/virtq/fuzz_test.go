//go:build linux

package virtq_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

// within says whether b lies inside one of the regions.
func within(b []byte, regions ...[]byte) bool {
	if len(b) == 0 {
		return true
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, r := range regions {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(r)))
		if p >= start && p-start <= uintptr(len(r)) && uintptr(len(b)) <= uintptr(len(r))-(p-start) && cap(b) == len(b) {
			return true
		}
	}
	return false
}

// FuzzPop lets the fuzzer write the whole of a small guest memory — the
// descriptor table, both rings, indirect tables, the buffers — and the
// index the device starts from, then pops until the queue is dry or
// broken. Pop must not panic, and every chain it returns must keep to
// the rules: slices inside the memory, at most the byte limit, at most
// Size descriptors (or one indirect table's worth).
func FuzzPop(f *testing.F) {
	const (
		size     = 8
		limit    = 0x1800
		aBase    = 0x1000
		aSize    = 0x1000
		bBase    = 0x3000
		bSize    = 0x800
		desc     = aBase
		avail    = aBase + 16*size
		used     = aBase + 0x100
		maxChain = size
	)
	seed := func(lastAvail uint16, build func(a []byte)) {
		a := make([]byte, aSize)
		build(a)
		f.Add(a, make([]byte, 16), lastAvail)
	}
	putDesc := func(a []byte, table, i int, addr uint64, n uint32, flags, next uint16) {
		o := table - aBase + 16*i
		binary.LittleEndian.PutUint64(a[o:], addr)
		binary.LittleEndian.PutUint32(a[o+8:], n)
		binary.LittleEndian.PutUint16(a[o+12:], flags)
		binary.LittleEndian.PutUint16(a[o+14:], next)
	}
	putAvail := func(a []byte, idx uint16, heads ...uint16) {
		for i, h := range heads {
			binary.LittleEndian.PutUint16(a[avail-aBase+4+2*i:], h)
		}
		binary.LittleEndian.PutUint16(a[avail-aBase+2:], idx)
	}
	seed(0, func(a []byte) { // one direct chain, readable then writable
		putDesc(a, desc, 0, aBase+0x800, 16, virtq.DescFNext, 1)
		putDesc(a, desc, 1, bBase, 32, virtq.DescFWrite, 0)
		putAvail(a, 1, 0)
	})
	seed(0, func(a []byte) { // an indirect chain
		putDesc(a, aBase+0x400, 0, aBase+0x800, 16, virtq.DescFNext, 1)
		putDesc(a, aBase+0x400, 1, bBase, 32, virtq.DescFWrite, 0)
		putDesc(a, desc, 2, aBase+0x400, 32, virtq.DescFIndirect, 0)
		putAvail(a, 1, 2)
	})
	seed(0, func(a []byte) { // a loop
		putDesc(a, desc, 0, aBase+0x800, 16, virtq.DescFNext, 1)
		putDesc(a, desc, 1, aBase+0x800, 16, virtq.DescFNext, 0)
		putAvail(a, 1, 0)
	})
	seed(0xfffe, func(a []byte) { // wrapping indices
		putDesc(a, desc, 0, bBase+0x7f0, 16, 0, 0)
		putAvail(a, 2, 0, 0, 0, 0, 0, 0, 0, 0)
	})
	f.Fuzz(func(t *testing.T, aData, bData []byte, lastAvail uint16) {
		a := make([]byte, aSize)
		b := make([]byte, bSize)
		copy(a, aData)
		copy(b, bData)
		mem, err := virtq.NewMemory(virtq.Region{GuestAddr: aBase, Data: a}, virtq.Region{GuestAddr: bBase, Data: b})
		if err != nil {
			t.Fatal(err)
		}
		q, err := virtq.New(mem, virtq.Config{Size: size, DescAddr: desc, AvailAddr: avail, UsedAddr: used, LastAvail: lastAvail, Indirect: true, MaxChainBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 * size {
			c, err := q.Pop()
			if err != nil || c == nil {
				return
			}
			if c.Head >= size {
				t.Fatalf("head %d", c.Head)
			}
			if n := len(c.Readable) + len(c.Writable); n > maxChain {
				t.Fatalf("a chain of %d buffers", n)
			}
			total := 0
			for _, s := range append(append([][]byte(nil), c.Readable...), c.Writable...) {
				if !within(s, a, b) {
					t.Fatalf("a slice of %d bytes outside guest memory", len(s))
				}
				total += len(s)
			}
			if total > limit {
				t.Fatalf("a chain of %d bytes", total)
			}
			if err := q.Push(c.Head, uint32(total)); err != nil {
				t.Fatal(err)
			}
		}
	})
}
