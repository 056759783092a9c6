package ext4

import "fmt"

// On-disk constants. The layout is the classic ext2/3/4 one without
// flex_bg: every block group starts with its superblock backup and group
// descriptor copy (groups 0, 1 and powers of 3, 5 and 7), then its block
// bitmap, inode bitmap and inode table, then data blocks.
const (
	blockSize      = 4096
	blocksPerGroup = 8 * blockSize // one bitmap block covers a group
	inodeSize      = 256
	extraIsize     = 32 // i_extra_isize: the fields up to i_projid
	inodesPerBlock = blockSize / inodeSize
	descSize       = 32 // group descriptor without the 64bit feature
	maxExtentLen   = 32768

	rootIno      = 2
	journalIno   = 8
	lostFoundIno = 11
	firstIno     = 11 // first inode not reserved by the filesystem

	defaultInodeRatio = 16384
	maxLinks          = 65000
)

// geometry is the group layout for a block count and inode count.
type geometry struct {
	blocks       uint32 // filesystem blocks
	groups       uint32
	ipg          uint32 // inodes per group
	itableBlocks uint32 // inode table blocks per group
	gdtBlocks    uint32 // group descriptor table blocks
}

// newGeometry lays out blocks blocks with about inodes inodes. A last group
// too small for its own metadata is left out of the filesystem.
func newGeometry(blocks uint64, inodes uint64) (geometry, error) {
	if blocks > 1<<32-1 {
		return geometry{}, fmt.Errorf("ext4: %d blocks is more than a filesystem without the 64bit feature holds", blocks)
	}
	for {
		var ge geometry
		ge.blocks = uint32(blocks)
		ge.groups = uint32((blocks + blocksPerGroup - 1) / blocksPerGroup)
		if ge.groups == 0 {
			return geometry{}, fmt.Errorf("ext4: image of %d blocks is too small", blocks)
		}
		ge.gdtBlocks = (ge.groups*descSize + blockSize - 1) / blockSize
		ipg := (inodes + uint64(ge.groups) - 1) / uint64(ge.groups)
		ipg = (ipg + inodesPerBlock - 1) / inodesPerBlock * inodesPerBlock
		ipg = max(ipg, inodesPerBlock)
		ipg = min(ipg, blocksPerGroup)
		if ge.groups == 1 && ipg < 2*inodesPerBlock {
			ipg = 2 * inodesPerBlock // room for the reserved inodes and a few more
		}
		ge.ipg = uint32(ipg)
		ge.itableBlocks = ge.ipg / inodesPerBlock
		last := ge.groups - 1
		if ge.groupLen(last) > ge.overhead(last) {
			return ge, nil
		}
		if ge.groups == 1 {
			return geometry{}, fmt.Errorf("ext4: image of %d blocks is too small for its own metadata (%d blocks)", blocks, ge.overhead(0)+1)
		}
		blocks = uint64(last) * blocksPerGroup
	}
}

// hasSuper reports whether group g holds a superblock copy (sparse_super).
func hasSuper(g uint32) bool {
	if g <= 1 {
		return true
	}
	for _, p := range []uint32{3, 5, 7} {
		n := p
		for n < g {
			n *= p
		}
		if n == g {
			return true
		}
	}
	return false
}

func (ge *geometry) groupStart(g uint32) uint32 { return g * blocksPerGroup }

func (ge *geometry) groupLen(g uint32) uint32 {
	if g == ge.groups-1 {
		return ge.blocks - g*blocksPerGroup
	}
	return blocksPerGroup
}

// overhead is the number of metadata blocks at the start of group g.
func (ge *geometry) overhead(g uint32) uint32 {
	n := 2 + ge.itableBlocks
	if hasSuper(g) {
		n += 1 + ge.gdtBlocks
	}
	return n
}

func (ge *geometry) blockBitmap(g uint32) uint32 {
	b := ge.groupStart(g)
	if hasSuper(g) {
		b += 1 + ge.gdtBlocks
	}
	return b
}

func (ge *geometry) inodeBitmap(g uint32) uint32 { return ge.blockBitmap(g) + 1 }
func (ge *geometry) inodeTable(g uint32) uint32  { return ge.blockBitmap(g) + 2 }
func (ge *geometry) dataStart(g uint32) uint32   { return ge.groupStart(g) + ge.overhead(g) }
func (ge *geometry) groupEnd(g uint32) uint32    { return ge.groupStart(g) + ge.groupLen(g) }
func (ge *geometry) inodes() uint32              { return ge.groups * ge.ipg }

// dataBlocks is the number of blocks left for files, directories and their
// extent and attribute blocks.
func (ge *geometry) dataBlocks() uint64 {
	var n uint64
	for g := uint32(0); g < ge.groups; g++ {
		n += uint64(ge.groupLen(g) - ge.overhead(g))
	}
	return n
}

// run is a contiguous range of blocks.
type run struct {
	start uint32
	len   uint32
}

// allocator hands out data blocks in order, group after group. Nothing is
// ever freed, so the used blocks of a group are a prefix of its data area.
type allocator struct {
	ge       *geometry
	g        uint32 // current group
	next     uint32 // next free block in group g
	used     uint64 // data blocks handed out
	capacity uint64 // data blocks in the filesystem
	overflow uint64 // blocks asked for after the image was full
}

func newAllocator(ge *geometry) *allocator {
	return &allocator{ge: ge, next: ge.dataStart(0), capacity: ge.dataBlocks()}
}

// alloc returns n blocks as runs no longer than an extent may be. It
// returns false, and counts the blocks as overflow, when they do not fit.
func (a *allocator) alloc(n uint64) ([]run, bool) {
	if a.overflow > 0 || a.free() < n {
		a.overflow += n
		return nil, false
	}
	var runs []run
	for n > 0 {
		end := a.ge.groupEnd(a.g)
		if a.next >= end {
			a.g++
			a.next = a.ge.dataStart(a.g)
			continue
		}
		take := uint32(min(n, uint64(end-a.next), maxExtentLen))
		if k := len(runs) - 1; k >= 0 && runs[k].start+runs[k].len == a.next && runs[k].len+take <= maxExtentLen {
			runs[k].len += take
		} else {
			runs = append(runs, run{a.next, take})
		}
		a.next += take
		a.used += uint64(take)
		n -= uint64(take)
	}
	return runs, true
}

// free is the number of data blocks not yet handed out.
func (a *allocator) free() uint64 { return a.capacity - a.used }

// usedInGroup is the number of data blocks handed out in group g.
func (a *allocator) usedInGroup(g uint32) uint32 {
	switch {
	case g < a.g:
		return a.ge.groupLen(g) - a.ge.overhead(g)
	case g == a.g:
		return a.next - a.ge.dataStart(g)
	}
	return 0
}
