package qcow2

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// image is an independent reading of a qcow2 file, written from the format
// description rather than from the writer's code.
type image struct {
	raw         []byte
	clusterBits uint
	cs          int64
	size        int64
	l1          []uint64
	l1Offset    int64
	rtOffset    int64
	rtClusters  int64
	backing     string
	backingFmt  string
}

const offsetMask = 0x00fffffffffffe00 // bits 9-55

func parseImage(t *testing.T, raw []byte) *image {
	t.Helper()
	be := binary.BigEndian
	if len(raw) < 104 {
		t.Fatalf("image is %d bytes, shorter than a header", len(raw))
	}
	if got := be.Uint32(raw[0:]); got != 0x514649fb {
		t.Fatalf("magic %#x", got)
	}
	if got := be.Uint32(raw[4:]); got != 3 {
		t.Fatalf("version %d, want 3", got)
	}
	im := &image{raw: raw}
	im.clusterBits = uint(be.Uint32(raw[20:]))
	im.cs = int64(1) << im.clusterBits
	im.size = int64(be.Uint64(raw[24:]))
	if c := be.Uint32(raw[32:]); c != 0 {
		t.Fatalf("crypt_method %d", c)
	}
	l1Size := int64(be.Uint32(raw[36:]))
	im.l1Offset = int64(be.Uint64(raw[40:]))
	im.rtOffset = int64(be.Uint64(raw[48:]))
	im.rtClusters = int64(be.Uint32(raw[56:]))
	if n := be.Uint32(raw[60:]); n != 0 {
		t.Fatalf("nb_snapshots %d", n)
	}
	for _, off := range []int{72, 80, 88} {
		if f := be.Uint64(raw[off:]); f != 0 {
			t.Fatalf("feature bits at %d: %#x", off, f)
		}
	}
	if o := be.Uint32(raw[96:]); o != 4 {
		t.Fatalf("refcount_order %d", o)
	}
	hl := int(be.Uint32(raw[100:]))
	if hl < 104 || hl%8 != 0 {
		t.Fatalf("header_length %d", hl)
	}
	if int64(len(raw))%im.cs != 0 {
		t.Fatalf("file size %d is not a multiple of the cluster size %d", len(raw), im.cs)
	}
	if im.size%512 != 0 {
		t.Fatalf("virtual size %d not a multiple of 512", im.size)
	}
	if want := (im.size + im.cs - 1) / im.cs; (want+im.cs/8-1)/(im.cs/8) != l1Size {
		t.Fatalf("l1_size %d, want %d for %d clusters", l1Size, (want+im.cs/8-1)/(im.cs/8), want)
	}
	// Header extensions.
	p := hl
	for {
		typ, n := be.Uint32(raw[p:]), int(be.Uint32(raw[p+4:]))
		if typ == 0 {
			p += 8
			break
		}
		data := string(raw[p+8 : p+8+n])
		if typ == 0xe2792aca {
			im.backingFmt = data
		}
		p += 8 + (n+7)&^7
	}
	if bo := int64(be.Uint64(raw[8:])); bo != 0 {
		if bo < int64(p) || bo >= im.cs {
			t.Fatalf("backing name at %d, extensions end at %d", bo, p)
		}
		im.backing = string(raw[bo : bo+int64(be.Uint32(raw[16:]))])
	}
	for i := range l1Size {
		im.l1 = append(im.l1, be.Uint64(raw[im.l1Offset+i*8:]))
	}
	return im
}

// hostOffset maps a guest cluster to its host offset, or 0.
func (im *image) hostOffset(guest int64) int64 {
	l2e := im.cs / 8
	e := im.l1[guest/l2e]
	if e&offsetMask == 0 {
		return 0
	}
	l2 := int64(e & offsetMask)
	d := binary.BigEndian.Uint64(im.raw[l2+(guest%l2e)*8:])
	return int64(d & offsetMask)
}

// ReadAt reads the virtual disk; unallocated clusters read as zeros.
func (im *image) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > im.size {
		return 0, fmt.Errorf("read past virtual size")
	}
	for n := 0; n < len(p); {
		pos := off + int64(n)
		in := pos % im.cs
		k := min(int64(len(p)-n), im.cs-in)
		if h := im.hostOffset(pos / im.cs); h != 0 {
			copy(p[n:n+int(k)], im.raw[h+in:h+in+k])
		} else {
			clear(p[n : n+int(k)])
		}
		n += int(k)
	}
	return len(p), nil
}

// allocated counts the guest clusters that have host clusters.
func (im *image) allocated() int64 {
	n := int64(0)
	for g := range (im.size + im.cs - 1) / im.cs {
		if im.hostOffset(g) != 0 {
			n++
		}
	}
	return n
}

// checkRefcounts recomputes every cluster's references and compares them
// with the stored refcounts: no leaks, no double use, no missing counts,
// and the "copied" bit on every L1 and L2 entry.
func (im *image) checkRefcounts(t *testing.T) {
	t.Helper()
	be := binary.BigEndian
	refs := map[int64]int{}
	use := func(off, n int64, what string) {
		if off%im.cs != 0 || off < 0 || off+n*im.cs > int64(len(im.raw)) {
			t.Fatalf("%s at %d (%d clusters) is unaligned or outside the file", what, off, n)
		}
		for i := range n {
			refs[off/im.cs+i]++
		}
	}
	use(0, 1, "header")
	use(im.l1Offset, (int64(len(im.l1))*8+im.cs-1)/im.cs, "L1 table")
	for i, e := range im.l1 {
		if e == 0 {
			continue
		}
		if e&^(offsetMask|1<<63) != 0 || e&(1<<63) == 0 {
			t.Fatalf("L1[%d] = %#x: reserved bits or copied bit wrong", i, e)
		}
		l2 := int64(e & offsetMask)
		use(l2, 1, "L2 table")
		for j := range im.cs / 8 {
			d := be.Uint64(im.raw[l2+j*8:])
			if d == 0 {
				continue
			}
			if d&^(offsetMask|1<<63) != 0 || d&(1<<63) == 0 {
				t.Fatalf("L2 entry %d of L1[%d] = %#x: reserved, zero or copied bit wrong", j, i, d)
			}
			use(int64(d&offsetMask), 1, "data cluster")
		}
	}
	use(im.rtOffset, im.rtClusters, "refcount table")
	perBlock := im.cs / 2
	total := int64(len(im.raw)) / im.cs
	for i := range im.rtClusters * im.cs / 8 {
		if rte := int64(be.Uint64(im.raw[im.rtOffset+i*8:])); rte != 0 {
			use(rte, 1, "refcount block")
		}
	}
	for c := range total {
		stored := 0
		if rte := int64(be.Uint64(im.raw[im.rtOffset+(c/perBlock)*8:])); rte != 0 {
			stored = int(be.Uint16(im.raw[rte+(c%perBlock)*2:]))
		}
		if refs[c] != stored {
			t.Errorf("cluster %d: %d references, refcount %d", c, refs[c], stored)
		}
	}
	for c := range refs {
		if c >= total {
			t.Errorf("cluster %d referenced past the end of the file", c)
		}
	}
}
