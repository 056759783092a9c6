//go:build linux

package virtq

import (
	"errors"
	"fmt"
	"sort"
)

// ErrOutOfBounds is wrapped by every error for a guest address range that
// is not wholly inside one mapped region.
var ErrOutOfBounds = errors.New("virtq: guest address range outside mapped memory")

// Region is one range of guest-physical memory mapped into this process:
// guest addresses [GuestAddr, GuestAddr+len(Data)) are the bytes of Data.
type Region struct {
	GuestAddr uint64
	Data      []byte
}

// Memory translates guest-physical addresses to host bytes. It is
// immutable once made, and safe for concurrent use.
type Memory struct {
	regions []Region // sorted by GuestAddr, not overlapping
}

// NewMemory returns the memory made of regions. A region must be
// non-empty, must not run past the end of the 64-bit address space and
// must not overlap another. The slices are kept, not copied.
func NewMemory(regions ...Region) (*Memory, error) {
	rs := append([]Region(nil), regions...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].GuestAddr < rs[j].GuestAddr })
	for i, r := range rs {
		size := uint64(len(r.Data))
		if size == 0 {
			return nil, fmt.Errorf("virtq: memory region at %#x is empty", r.GuestAddr)
		}
		if size-1 > ^uint64(0)-r.GuestAddr {
			return nil, fmt.Errorf("virtq: memory region at %#x of %#x bytes runs past the address space", r.GuestAddr, size)
		}
		if i > 0 {
			p := rs[i-1]
			if r.GuestAddr-p.GuestAddr < uint64(len(p.Data)) {
				return nil, fmt.Errorf("virtq: memory regions at %#x and %#x overlap", p.GuestAddr, r.GuestAddr)
			}
		}
	}
	return &Memory{regions: rs}, nil
}

// Regions returns the number of regions.
func (m *Memory) Regions() int { return len(m.regions) }

// Slice returns the n bytes at guest address addr. The range must lie
// inside one region; a range of zero bytes yields an empty slice and
// no error wherever it is. The returned slice's capacity is its length.
func (m *Memory) Slice(addr, n uint64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	// The last region starting at or below addr is the only candidate.
	i := sort.Search(len(m.regions), func(i int) bool { return m.regions[i].GuestAddr > addr }) - 1
	if i < 0 {
		return nil, fmt.Errorf("%w: %#x+%#x is below every region", ErrOutOfBounds, addr, n)
	}
	r := m.regions[i]
	off := addr - r.GuestAddr
	size := uint64(len(r.Data))
	if off >= size {
		return nil, fmt.Errorf("%w: %#x+%#x is in no region", ErrOutOfBounds, addr, n)
	}
	if n > size-off {
		return nil, fmt.Errorf("%w: %#x+%#x runs past the end of the region at %#x", ErrOutOfBounds, addr, n, r.GuestAddr)
	}
	return r.Data[off : off+n : off+n], nil
}
