package ext4

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// xattr is one extended attribute as ext4 stores it: a name index for
// the namespace prefix, the rest of the name, and the value.
type xattr struct {
	index uint8
	name  string
	value []byte
}

const (
	xattrMagic      = 0xEA020000
	xattrBlockHdr   = 32
	xattrEntryFixed = 16
	inodeXattrSpace = inodeSize - 128 - extraIsize // after i_extra_isize fields

	aclAccess  = 2
	aclDefault = 3
)

// xattrPrefixes maps name prefixes to ext4's name indexes; the exact ACL
// names come before "system.".
var xattrPrefixes = []struct {
	prefix string
	index  uint8
}{
	{"user.", 1},
	{"system.posix_acl_access", aclAccess},
	{"system.posix_acl_default", aclDefault},
	{"trusted.", 4},
	{"security.", 6},
	{"system.", 7},
}

// newXattr splits a full attribute name into index and suffix and turns a
// POSIX ACL from the xattr form tar carries into ext4's on-disk form.
func newXattr(full string, value []byte) (xattr, error) {
	for _, p := range xattrPrefixes {
		if !strings.HasPrefix(full, p.prefix) {
			continue
		}
		x := xattr{index: p.index, name: strings.TrimPrefix(full, p.prefix), value: value}
		if p.index == aclAccess || p.index == aclDefault {
			if x.name != "" {
				continue
			}
			v, err := aclToDisk(value)
			if err != nil {
				return xattr{}, fmt.Errorf("extended attribute %s: %w", full, err)
			}
			x.value = v
		}
		if len(x.name) > 255 {
			return xattr{}, fmt.Errorf("extended attribute name %.40s... is longer than 255 bytes", full)
		}
		return x, nil
	}
	return xattr{}, fmt.Errorf("extended attribute %q: namespace not supported by ext4", full)
}

// aclToDisk converts a POSIX ACL from the xattr form (version 2, 8-byte
// entries) to ext4's (version 1, 4-byte entries for the owner, group,
// mask and other tags).
func aclToDisk(v []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(v) < 4 || (len(v)-4)%8 != 0 || le.Uint32(v) != 2 {
		return nil, fmt.Errorf("not a version 2 POSIX ACL")
	}
	out := le.AppendUint32(nil, 1)
	for e := v[4:]; len(e) > 0; e = e[8:] {
		tag := le.Uint16(e)
		out = le.AppendUint16(out, tag)
		out = le.AppendUint16(out, le.Uint16(e[2:]))
		switch tag {
		case 0x01, 0x04, 0x10, 0x20: // USER_OBJ, GROUP_OBJ, MASK, OTHER
		case 0x02, 0x08: // USER, GROUP
			out = le.AppendUint32(out, le.Uint32(e[4:]))
		default:
			return nil, fmt.Errorf("unknown ACL tag %#x", tag)
		}
	}
	return out, nil
}

func sortXattrs(xs []xattr) {
	sort.Slice(xs, func(i, j int) bool {
		a, b := xs[i], xs[j]
		if a.index != b.index {
			return a.index < b.index
		}
		if len(a.name) != len(b.name) {
			return len(a.name) < len(b.name)
		}
		return a.name < b.name
	})
}

func pad4(n int) int { return (n + 3) &^ 3 }

func (x xattr) entryLen() int { return pad4(xattrEntryFixed + len(x.name)) }

// xattrsSize is the space the attributes take: entries, the 4-byte end
// marker and padded values.
func xattrsSize(xs []xattr) int {
	n := 4
	for _, x := range xs {
		n += x.entryLen() + pad4(len(x.value))
	}
	return n
}

// fitsInInode reports whether xs fit in the inode body after its magic.
func fitsInInode(xs []xattr) bool { return 4+xattrsSize(xs) <= inodeXattrSpace }

// fitsInBlock reports whether xs fit in one attribute block.
func fitsInBlock(xs []xattr) bool { return xattrBlockHdr+xattrsSize(xs) <= blockSize }

// putXattrs writes entries from the start of region and values from its
// end; value offsets are relative to base, the start of the region for an
// inode body and the start of the block for a block. It returns the
// entries' hashes.
func putXattrs(region []byte, base int, xs []xattr) []uint32 {
	le := binary.LittleEndian
	off, end := 0, len(region)
	hashes := make([]uint32, len(xs))
	for i, x := range xs {
		e := region[off:]
		e[0] = uint8(len(x.name))
		e[1] = x.index
		var voff int
		if len(x.value) > 0 {
			end -= pad4(len(x.value))
			copy(region[end:], x.value)
			voff = base + end
		}
		le.PutUint16(e[2:], uint16(voff))
		le.PutUint32(e[8:], uint32(len(x.value)))
		hashes[i] = xattrHash(x.name, region[end:end+pad4(len(x.value))], len(x.value) > 0)
		le.PutUint32(e[12:], hashes[i])
		copy(e[xattrEntryFixed:], x.name)
		off += x.entryLen()
	}
	return hashes
}

// xattrHash is ext4's entry hash over the name and the padded value.
func xattrHash(name string, padded []byte, hasValue bool) uint32 {
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h<<5 ^ h>>27 ^ uint32(name[i])
	}
	if hasValue {
		for v := padded; len(v) >= 4; v = v[4:] {
			h = h<<16 ^ h>>16 ^ binary.LittleEndian.Uint32(v)
		}
	}
	return h
}

// putInodeXattrs writes xs into an inode body region (after the extra
// fields).
func putInodeXattrs(b []byte, xs []xattr) {
	binary.LittleEndian.PutUint32(b, xattrMagic)
	putXattrs(b[4:inodeXattrSpace], 0, xs)
}

// xattrBlock encodes xs as an attribute block owned by one inode.
func xattrBlock(xs []xattr) []byte {
	le := binary.LittleEndian
	b := make([]byte, blockSize)
	le.PutUint32(b[0:], xattrMagic)
	le.PutUint32(b[4:], 1) // h_refcount
	le.PutUint32(b[8:], 1) // h_blocks
	hashes := putXattrs(b[xattrBlockHdr:], xattrBlockHdr, xs)
	var h uint32
	for _, eh := range hashes {
		if eh == 0 {
			h = 0
			break
		}
		h = h<<16 ^ h>>16 ^ eh
	}
	le.PutUint32(b[16:], h) // h_hash
	return b
}

// xattrsFromPAX collects the SCHILY.xattr records of a tar header.
func xattrsFromPAX(records map[string]string) ([]xattr, error) {
	var xs []xattr
	for k, v := range records {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		x, err := newXattr(name, []byte(v))
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	sortXattrs(xs)
	return xs, nil
}
