package ext4

import (
	"encoding/binary"
	"sort"
)

// dirent is a name in a directory.
type dirent struct {
	name  string
	ino   uint32
	ftype uint8
}

const direntFixed = 8 // inode, rec_len, name_len, file_type

func direntLen(name string) int { return pad4(direntFixed + len(name)) }

// packDir lays out a directory's entries as linear ext4 directory blocks:
// "." and ".." first, then entries sorted by name, the last entry of each
// block stretched to the block's end. minBlocks pads with empty blocks.
func packDir(self, parent uint32, entries []dirent, minBlocks int) []byte {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	all := make([]dirent, 0, len(entries)+2)
	all = append(all, dirent{".", self, 2}, dirent{"..", parent, 2})
	all = append(all, entries...)

	le := binary.LittleEndian
	var out []byte
	block := make([]byte, blockSize)
	off, last := 0, 0
	flush := func() {
		le.PutUint16(block[last+4:], uint16(blockSize-last))
		out = append(out, block...)
		clear(block)
		off, last = 0, 0
	}
	for _, e := range all {
		n := direntLen(e.name)
		if off+n > blockSize {
			flush()
		}
		le.PutUint32(block[off:], e.ino)
		le.PutUint16(block[off+4:], uint16(n))
		block[off+6] = uint8(len(e.name))
		block[off+7] = e.ftype
		copy(block[off+direntFixed:], e.name)
		last = off
		off += n
	}
	flush()
	for len(out) < minBlocks*blockSize {
		le.PutUint16(block[4:], blockSize) // one empty entry: inode 0
		out = append(out, block...)
		clear(block)
	}
	return out
}
