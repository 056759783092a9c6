package ext4

import (
	"crypto/sha256"
	"encoding/binary"
)

// Feature flags the images carry.
const (
	compatHasJournal = 0x0004
	compatExtAttr    = 0x0008
	compatDirIndex   = 0x0020

	incompatFiletype = 0x0002
	incompatExtents  = 0x0040

	roCompatSparseSuper = 0x0001
	roCompatLargeFile   = 0x0002
	roCompatDirNlink    = 0x0020
	roCompatExtraIsize  = 0x0040

	superMagic          = 0xEF53
	flagsUnsignedHash   = 0x0002
	hashHalfMD4         = 1
	defmUserXattrAndACL = 0x000C
)

// derive hashes the seed under a purpose label into 16 bytes.
func derive(purpose string, seed []byte) [16]byte {
	h := sha256.New()
	h.Write([]byte("sbx ext4 " + purpose + "\x00"))
	h.Write(seed)
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// uuidFromSeed is a version 4 style UUID derived from the seed.
func uuidFromSeed(seed []byte) [16]byte {
	u := derive("uuid", seed)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// writeMetadata writes the inode tables, bitmaps, group descriptors and
// superblocks, and returns the image's statistics.
func (b *builder) writeMetadata() (Stats, error) {
	ge := &b.ge
	le := binary.LittleEndian
	used := uint32(len(b.inodes)) // inodes 1..used are in use
	table := make([]byte, ge.itableBlocks*blockSize)
	gdt := make([]byte, ge.gdtBlocks*blockSize)
	bitmap := make([]byte, blockSize)
	var freeBlocks, freeInodes uint32
	for g := uint32(0); g < ge.groups; g++ {
		first := g*ge.ipg + 1 // first inode of the group
		inUse := min(max(int64(used)-int64(first)+1, 0), int64(ge.ipg))
		var dirs uint16
		if inUse > 0 || !b.zeroed {
			clear(table)
			for i := range inUse {
				n := b.inodes[int64(first)-1+i]
				if n == nil {
					continue
				}
				if n.isDir() {
					dirs++
				}
				if err := n.encode(table[i*inodeSize : (i+1)*inodeSize]); err != nil {
					return Stats{}, err
				}
			}
			if err := b.writeBlocks(ge.inodeTable(g), table); err != nil {
				return Stats{}, err
			}
		}

		usedBlocks := ge.overhead(g) + b.al.usedInGroup(g)
		clear(bitmap)
		setBits(bitmap, 0, usedBlocks)
		setBits(bitmap, ge.groupLen(g), blocksPerGroup) // past the end of the filesystem
		if err := b.writeBlocks(ge.blockBitmap(g), bitmap); err != nil {
			return Stats{}, err
		}
		clear(bitmap)
		setBits(bitmap, 0, uint32(inUse))
		setBits(bitmap, ge.ipg, blocksPerGroup) // padding after the group's inodes
		if err := b.writeBlocks(ge.inodeBitmap(g), bitmap); err != nil {
			return Stats{}, err
		}

		gFreeBlocks := ge.groupLen(g) - usedBlocks
		gFreeInodes := ge.ipg - uint32(inUse)
		d := gdt[g*descSize:]
		le.PutUint32(d[0:], ge.blockBitmap(g))
		le.PutUint32(d[4:], ge.inodeBitmap(g))
		le.PutUint32(d[8:], ge.inodeTable(g))
		le.PutUint16(d[12:], uint16(gFreeBlocks))
		le.PutUint16(d[14:], uint16(gFreeInodes))
		le.PutUint16(d[16:], dirs)
		freeBlocks += gFreeBlocks
		freeInodes += gFreeInodes
	}

	sb := b.superblock(freeBlocks, freeInodes)
	block := make([]byte, blockSize)
	for g := uint32(0); g < ge.groups; g++ {
		if !hasSuper(g) {
			continue
		}
		clear(block)
		if g == 0 {
			copy(block[1024:], sb) // the first 1024 bytes are left for a boot loader
		} else {
			copy(block, sb)
			le.PutUint16(block[90:], uint16(g)) // s_block_group_nr
		}
		if err := b.writeBlocks(ge.groupStart(g), block); err != nil {
			return Stats{}, err
		}
		if err := b.writeBlocks(ge.groupStart(g)+1, gdt); err != nil {
			return Stats{}, err
		}
	}

	st := b.stats
	st.Blocks = ge.blocks
	st.FreeBlocks = freeBlocks
	st.Inodes = ge.inodes()
	st.FreeInodes = freeInodes
	st.UUID = uuidFromSeed(b.opts.Seed)
	return st, nil
}

// setBits sets bits [from, to) of a bitmap.
func setBits(bm []byte, from, to uint32) {
	for i := from; i < to; i++ {
		if i%8 == 0 && i+8 <= to {
			bm[i/8] = 0xff
			i += 7
			continue
		}
		bm[i/8] |= 1 << (i % 8)
	}
}

// superblock encodes the 1024-byte primary superblock.
func (b *builder) superblock(freeBlocks, freeInodes uint32) []byte {
	ge := &b.ge
	le := binary.LittleEndian
	s := make([]byte, 1024)
	epoch := uint32(b.opts.Epoch)
	le.PutUint32(s[0:], ge.inodes())
	le.PutUint32(s[4:], ge.blocks)
	le.PutUint32(s[8:], 0) // reserved blocks: none, the guest may use everything
	le.PutUint32(s[12:], freeBlocks)
	le.PutUint32(s[16:], freeInodes)
	le.PutUint32(s[20:], 0) // first data block
	le.PutUint32(s[24:], 2) // log2(block size) - 10
	le.PutUint32(s[28:], 2) // cluster size
	le.PutUint32(s[32:], blocksPerGroup)
	le.PutUint32(s[36:], blocksPerGroup)
	le.PutUint32(s[40:], ge.ipg)
	le.PutUint32(s[48:], epoch)      // last write
	le.PutUint16(s[54:], 0xffff)     // no mount-count check
	le.PutUint16(s[56:], superMagic) //
	le.PutUint16(s[58:], 1)          // cleanly unmounted
	le.PutUint16(s[60:], 1)          // errors: continue
	le.PutUint32(s[64:], epoch)      // last check
	le.PutUint32(s[76:], 1)          // dynamic revision
	le.PutUint32(s[84:], firstIno)
	le.PutUint16(s[88:], inodeSize)
	compat := uint32(compatExtAttr | compatDirIndex)
	if b.opts.JournalBlocks > 0 {
		compat |= compatHasJournal
	}
	le.PutUint32(s[92:], compat)
	le.PutUint32(s[96:], incompatFiletype|incompatExtents)
	le.PutUint32(s[100:], roCompatSparseSuper|roCompatLargeFile|roCompatDirNlink|roCompatExtraIsize)
	uuid := uuidFromSeed(b.opts.Seed)
	copy(s[104:120], uuid[:])
	copy(s[120:136], b.opts.Label)
	hashSeed := derive("hash seed", b.opts.Seed)
	copy(s[236:252], hashSeed[:])
	s[252] = hashHalfMD4
	le.PutUint32(s[256:], defmUserXattrAndACL)
	le.PutUint32(s[264:], epoch) // mkfs time
	le.PutUint16(s[348:], extraIsize)
	le.PutUint16(s[350:], extraIsize)
	le.PutUint32(s[352:], flagsUnsignedHash)
	if b.opts.JournalBlocks > 0 {
		j := b.get(journalIno)
		le.PutUint32(s[224:], journalIno)
		s[253] = 1 // s_jnl_backup_type: a copy of the journal inode's blocks
		copy(s[268:328], j.iblock[:])
		le.PutUint32(s[328:], uint32(j.size>>32))
		le.PutUint32(s[332:], uint32(j.size))
	}
	return s
}
