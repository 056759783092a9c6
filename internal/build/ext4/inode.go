package ext4

import (
	"encoding/binary"
	"fmt"
)

// File types in i_mode.
const (
	sIFIFO  = 0o010000
	sIFCHR  = 0o020000
	sIFDIR  = 0o040000
	sIFBLK  = 0o060000
	sIFREG  = 0o100000
	sIFLNK  = 0o120000
	sIFMT   = 0o170000
	extents = 0x80000 // EXT4_EXTENTS_FL
)

// timestamp is a point in time as ext4 stores it: seconds with two extra
// epoch bits and nanoseconds.
type timestamp struct {
	sec  int64
	nsec uint32
}

func (t timestamp) lo() uint32 { return uint32(t.sec) }

func (t timestamp) extra() uint32 {
	return uint32((t.sec-int64(int32(t.sec)))>>32)&3 | t.nsec<<2
}

// inode is one file as Build keeps it until the inode tables are written.
type inode struct {
	mode       uint16
	uid, gid   uint32
	size       uint64
	links      uint32
	time       timestamp
	flags      uint32
	iblock     [60]byte
	blocks     uint64 // 4 KiB blocks it owns: data, extent tree and attribute block
	xattrs     []xattr
	xattrBlock uint32
	entries    []dirent // a directory's names, without "." and ".."
	parent     uint32   // a directory's parent
	name       string   // the path it was created under, for errors
	ino        uint32
}

func (n *inode) isDir() bool { return n.mode&sIFMT == sIFDIR }

// fileType is the directory entry type code for n.
func (n *inode) fileType() uint8 {
	switch n.mode & sIFMT {
	case sIFREG:
		return 1
	case sIFDIR:
		return 2
	case sIFCHR:
		return 3
	case sIFBLK:
		return 4
	case sIFIFO:
		return 5
	case sIFLNK:
		return 7
	}
	return 0
}

// encode writes n as a 256-byte on-disk inode into b.
func (n *inode) encode(b []byte) error {
	le := binary.LittleEndian
	links := n.links
	if n.isDir() && links > maxLinks {
		links = 1 // dir_nlink: too many subdirectories to count
	}
	sectors := n.blocks * (blockSize / 512)
	if sectors >= 1<<48 {
		return fmt.Errorf("ext4: %s: %d blocks is too large", n.name, n.blocks)
	}
	le.PutUint16(b[0:], n.mode)
	le.PutUint16(b[2:], uint16(n.uid))
	le.PutUint32(b[4:], uint32(n.size))
	le.PutUint32(b[8:], n.time.lo())  // atime
	le.PutUint32(b[12:], n.time.lo()) // ctime
	le.PutUint32(b[16:], n.time.lo()) // mtime
	le.PutUint16(b[24:], uint16(n.gid))
	le.PutUint16(b[26:], uint16(links))
	le.PutUint32(b[28:], uint32(sectors))
	le.PutUint32(b[32:], n.flags)
	copy(b[40:100], n.iblock[:])
	le.PutUint32(b[104:], n.xattrBlock)
	le.PutUint32(b[108:], uint32(n.size>>32))
	le.PutUint16(b[116:], uint16(sectors>>32))
	le.PutUint16(b[120:], uint16(n.uid>>16))
	le.PutUint16(b[122:], uint16(n.gid>>16))
	le.PutUint16(b[128:], extraIsize)
	le.PutUint32(b[132:], n.time.extra()) // ctime
	le.PutUint32(b[136:], n.time.extra()) // mtime
	le.PutUint32(b[140:], n.time.extra()) // atime
	le.PutUint32(b[144:], n.time.lo())    // crtime
	le.PutUint32(b[148:], n.time.extra())
	if n.xattrBlock == 0 && len(n.xattrs) > 0 {
		putInodeXattrs(b[128+extraIsize:], n.xattrs)
	}
	return nil
}

// Extent tree on-disk sizes.
const (
	extentMagic     = 0xF30A
	extentEntrySize = 12
	extentsInInode  = 4
	extentsInBlock  = (blockSize - extentEntrySize) / extentEntrySize
)

func putExtentHeader(b []byte, entries, maxEntries, depth int) {
	le := binary.LittleEndian
	le.PutUint16(b[0:], extentMagic)
	le.PutUint16(b[2:], uint16(entries))
	le.PutUint16(b[4:], uint16(maxEntries))
	le.PutUint16(b[6:], uint16(depth))
}

// extentNode is one entry of an extent tree level: a leaf extent or an
// index entry, 12 bytes on disk, with the first logical block it covers.
type extentNode struct {
	logical uint32
	raw     [extentEntrySize]byte
}

// setExtents makes runs n's data, in order from logical block 0, building
// an extent tree whose blocks it allocates and writes. When the image is
// full it only counts the tree's blocks.
func (b *builder) setExtents(n *inode, runs []run) error {
	n.flags |= extents
	le := binary.LittleEndian
	nodes := make([]extentNode, 0, len(runs))
	var logical uint32
	for _, r := range runs {
		var e extentNode
		e.logical = logical
		le.PutUint32(e.raw[0:], logical)
		le.PutUint16(e.raw[4:], uint16(r.len))
		le.PutUint32(e.raw[8:], r.start)
		nodes = append(nodes, e)
		logical += r.len
		n.blocks += uint64(r.len)
	}
	depth := 0
	for len(nodes) > extentsInInode {
		var up []extentNode
		for i := 0; i < len(nodes); i += extentsInBlock {
			chunk := nodes[i:min(i+extentsInBlock, len(nodes))]
			n.blocks++
			blk, ok := b.al.alloc(1)
			if !ok {
				up = append(up, extentNode{logical: chunk[0].logical})
				continue
			}
			buf := make([]byte, blockSize)
			putExtentHeader(buf, len(chunk), extentsInBlock, depth)
			for j, c := range chunk {
				copy(buf[extentEntrySize*(j+1):], c.raw[:])
			}
			if err := b.writeBlocks(blk[0].start, buf); err != nil {
				return err
			}
			var e extentNode
			e.logical = chunk[0].logical
			le.PutUint32(e.raw[0:], e.logical)
			le.PutUint32(e.raw[4:], blk[0].start)
			up = append(up, e)
		}
		nodes = up
		depth++
	}
	n.iblock = [60]byte{}
	putExtentHeader(n.iblock[:], len(nodes), extentsInInode, depth)
	for j, c := range nodes {
		copy(n.iblock[extentEntrySize*(j+1):], c.raw[:])
	}
	return nil
}

// setDevice stores a device number in i_block the way the kernel does:
// the old 16-bit form when major and minor both fit a byte, else the new
// 32-bit form in the second word.
func (n *inode) setDevice(major, minor uint32) {
	le := binary.LittleEndian
	if major < 256 && minor < 256 {
		le.PutUint32(n.iblock[0:], major<<8|minor)
		return
	}
	le.PutUint32(n.iblock[4:], minor&0xff|major<<8|(minor&^0xff)<<12)
}
