//go:build linux

package vhostuser

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

// mappedRegion is one memory region of the front-end, mapped here.
type mappedRegion struct {
	memRegion
	data    []byte // the region's bytes
	mapping []byte // what mmap returned, for munmap
}

// guestMemory is a memory table: the mapped regions and the guest
// address translation over them.
type guestMemory struct {
	regions []mappedRegion
	mem     *virtq.Memory
}

// mapMemory maps each region from its descriptor. It closes nothing; on
// error nothing stays mapped.
func mapMemory(rs []memRegion, fds []int) (_ *guestMemory, err error) {
	if len(fds) != len(rs) {
		return nil, fmt.Errorf("%w: SET_MEM_TABLE: %d regions but %d descriptors", errProtocol, len(rs), len(fds))
	}
	g := &guestMemory{}
	defer func() {
		if err != nil {
			g.unmap()
		}
	}()
	page := uint64(unix.Getpagesize())
	var vrs []virtq.Region
	for i, r := range rs {
		switch {
		case r.size == 0:
			return nil, fmt.Errorf("vhost-user: memory region %d is empty", i)
		case r.size > math.MaxInt/2:
			return nil, fmt.Errorf("vhost-user: memory region %d of %#x bytes is too large", i, r.size)
		case r.size-1 > math.MaxUint64-r.guestAddr, r.size-1 > math.MaxUint64-r.userAddr:
			return nil, fmt.Errorf("vhost-user: memory region %d runs past the address space", i)
		case r.mmapOffset > math.MaxInt64/2:
			return nil, fmt.Errorf("vhost-user: memory region %d has offset %#x", i, r.mmapOffset)
		}
		for _, p := range g.regions {
			if r.userAddr-p.userAddr < p.size || p.userAddr-r.userAddr < r.size {
				return nil, fmt.Errorf("vhost-user: memory regions at user addresses %#x and %#x overlap", p.userAddr, r.userAddr)
			}
		}
		// An access to a page past the end of the file faults (SIGBUS),
		// which ends the process: the file must not shrink under the
		// mapping (sealed first), and must be large enough for it.
		var st unix.Stat_t
		if err := unix.Fstat(fds[i], &st); err != nil {
			return nil, fmt.Errorf("vhost-user: memory region %d: %w", i, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, fmt.Errorf("vhost-user: memory region %d is not backed by a file", i)
		}
		if err := sealShrink(fds[i]); err != nil {
			return nil, fmt.Errorf("vhost-user: memory region %d: %w", i, err)
		}
		if err := unix.Fstat(fds[i], &st); err != nil {
			return nil, fmt.Errorf("vhost-user: memory region %d: %w", i, err)
		}
		if st.Size < 0 || uint64(st.Size) < r.mmapOffset || uint64(st.Size)-r.mmapOffset < r.size {
			return nil, fmt.Errorf("vhost-user: memory region %d (%#x bytes at offset %#x) is past the end of its file (%#x bytes)", i, r.size, r.mmapOffset, st.Size)
		}
		start := r.mmapOffset &^ (page - 1)
		delta := r.mmapOffset - start
		mapping, err := unix.Mmap(fds[i], int64(start), int(delta+r.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
		if err != nil {
			return nil, fmt.Errorf("vhost-user: mapping memory region %d: %w", i, err)
		}
		mr := mappedRegion{memRegion: r, mapping: mapping, data: mapping[delta : delta+r.size : delta+r.size]}
		g.regions = append(g.regions, mr)
		vrs = append(vrs, virtq.Region{GuestAddr: r.guestAddr, Data: mr.data})
	}
	g.mem, err = virtq.NewMemory(vrs...)
	if err != nil {
		return nil, fmt.Errorf("vhost-user: memory table: %w", err)
	}
	return g, nil
}

// sealShrink makes sure the file fd cannot shrink: a memfd already
// sealed against it, or one that takes the seal now (QEMU never shrinks
// guest RAM). A file that cannot be sealed is refused.
func sealShrink(fd int) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("its file cannot be sealed against shrinking (a memfd can): %w", err)
	}
	if seals&unix.F_SEAL_SHRINK != 0 {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		return fmt.Errorf("sealing its file against shrinking: %w", err)
	}
	return nil
}

// userToGuest translates the n bytes at the front-end's virtual address
// uva to a guest-physical address; they must lie in one region.
func (g *guestMemory) userToGuest(uva, n uint64) (uint64, error) {
	for _, r := range g.regions {
		if uva-r.userAddr < r.size && n <= r.size-(uva-r.userAddr) {
			return r.guestAddr + (uva - r.userAddr), nil
		}
	}
	return 0, fmt.Errorf("vhost-user: user address range %#x+%#x is in no memory region", uva, n)
}

// unmap releases every mapping. Nothing may use the memory afterwards.
func (g *guestMemory) unmap() {
	for _, r := range g.regions {
		unix.Munmap(r.mapping)
	}
	g.regions = nil
	g.mem = nil
}
