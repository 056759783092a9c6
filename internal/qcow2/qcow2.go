package qcow2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Format constants from QEMU's docs/interop/qcow2.txt.
const (
	magic          = 0x514649fb // "QFI\xfb"
	formatVersion  = 3
	headerLength   = 104 // version 3 header without optional fields
	refcountOrder  = 4   // 16-bit refcounts, QEMU's default
	refcountBytes  = (1 << refcountOrder) / 8
	sectorSize     = 512
	maxBackingName = 1023

	extEnd           = 0x00000000
	extBackingFormat = 0xe2792aca

	// flagCopied marks L1 and L2 entries whose target has refcount one.
	flagCopied = uint64(1) << 63
)

// DefaultClusterBits gives 64 KiB clusters, QEMU's default.
const DefaultClusterBits = 16

// Options tunes the image layout. The zero value gives QEMU's defaults.
type Options struct {
	// ClusterBits is log2 of the cluster size, from 9 (512 bytes) to 21
	// (2 MiB, QEMU's limit). Zero means DefaultClusterBits.
	ClusterBits int
}

// geometry is what follows from the virtual size and cluster size alone.
type geometry struct {
	clusterBits uint
	clusterSize int64
	virtualSize int64 // rounded up to a multiple of sectorSize
	l2Entries   int64 // entries per L2 table
	l1Size      int64 // entries in the L1 table
}

func newGeometry(virtualSize int64, opts Options) (geometry, error) {
	bits := opts.ClusterBits
	if bits == 0 {
		bits = DefaultClusterBits
	}
	if bits < 9 || bits > 21 {
		return geometry{}, fmt.Errorf("qcow2: cluster bits %d out of range 9..21", bits)
	}
	if virtualSize < 0 {
		return geometry{}, fmt.Errorf("qcow2: negative virtual size %d", virtualSize)
	}
	g := geometry{clusterBits: uint(bits), clusterSize: int64(1) << bits}
	g.virtualSize = ceilDiv(virtualSize, sectorSize) * sectorSize
	if g.virtualSize < virtualSize {
		return geometry{}, fmt.Errorf("qcow2: virtual size %d too large", virtualSize)
	}
	g.l2Entries = g.clusterSize / 8
	g.l1Size = ceilDiv(ceilDiv(g.virtualSize, g.clusterSize), g.l2Entries)
	// QEMU refuses L1 tables over 32 MiB.
	if g.l1Size*8 > 32<<20 {
		return geometry{}, fmt.Errorf("qcow2: virtual size %d needs an L1 table over 32 MiB; use larger clusters", virtualSize)
	}
	return g, nil
}

// run is a stretch of allocated guest clusters, stored back to back in the
// image in the same order.
type run struct {
	guest int64 // first guest cluster index
	n     int64 // number of clusters
}

// layout places every structure of the image. Host cluster 0 is the header;
// data clusters are 1..dataClusters.
type layout struct {
	geometry
	dataClusters int64
	l2Count      int64 // L2 tables present
	l2Offset     int64
	l1Offset     int64
	l1Clusters   int64
	rtOffset     int64 // refcount table
	rtClusters   int64
	rbOffset     int64 // first refcount block
	rbCount      int64
	total        int64 // clusters in the file
}

func newLayout(g geometry, runs []run) layout {
	l := layout{geometry: g}
	lastL1 := int64(-1)
	for _, r := range runs {
		l.dataClusters += r.n
		first, last := r.guest/g.l2Entries, (r.guest+r.n-1)/g.l2Entries
		if first == lastL1 {
			first++
		}
		if last >= first {
			l.l2Count += last - first + 1
		}
		lastL1 = last
	}
	next := 1 + l.dataClusters
	l.l2Offset = next * g.clusterSize
	next += l.l2Count
	l.l1Offset = next * g.clusterSize
	l.l1Clusters = ceilDiv(l.l1Size*8, g.clusterSize)
	next += l.l1Clusters

	// The refcount blocks count every cluster, themselves and the refcount
	// table included: grow both until they cover the whole file.
	perBlock := g.clusterSize / refcountBytes
	rb, rt := int64(1), int64(1)
	for {
		total := next + rt + rb
		needRB := ceilDiv(total, perBlock)
		needRT := ceilDiv(needRB*8, g.clusterSize)
		if needRB <= rb && needRT <= rt {
			break
		}
		rb, rt = max(rb, needRB), max(rt, needRT)
	}
	l.rtOffset = next * g.clusterSize
	l.rtClusters = rt
	next += rt
	l.rbOffset = next * g.clusterSize
	l.rbCount = rb
	next += rb
	l.total = next
	return l
}

// header describes the optional parts of cluster 0.
type header struct {
	backingFile   string
	backingFormat string
}

func (h header) validate(clusterSize int64) error {
	if h.backingFile == "" {
		if h.backingFormat != "" {
			return errors.New("qcow2: backing format without a backing file")
		}
		return nil
	}
	if len(h.backingFile) > maxBackingName {
		return fmt.Errorf("qcow2: backing file name is %d bytes, more than %d", len(h.backingFile), maxBackingName)
	}
	switch h.backingFormat {
	case "raw", "qcow2":
	default:
		return fmt.Errorf("qcow2: backing format %q is not raw or qcow2", h.backingFormat)
	}
	if need := int64(headerLength + 8 + pad8(len(h.backingFormat)) + 8 + len(h.backingFile)); need > clusterSize {
		return fmt.Errorf("qcow2: header with backing file %q does not fit in a %d-byte cluster", h.backingFile, clusterSize)
	}
	return nil
}

// encode returns cluster 0 of the image laid out by l.
func (h header) encode(l layout) []byte {
	b := make([]byte, l.clusterSize)
	be := binary.BigEndian
	be.PutUint32(b[0:], magic)
	be.PutUint32(b[4:], formatVersion)
	be.PutUint32(b[20:], uint32(l.clusterBits))
	be.PutUint64(b[24:], uint64(l.virtualSize))
	// crypt_method (32) stays 0: no encryption.
	be.PutUint32(b[36:], uint32(l.l1Size))
	be.PutUint64(b[40:], uint64(l.l1Offset))
	be.PutUint64(b[48:], uint64(l.rtOffset))
	be.PutUint32(b[56:], uint32(l.rtClusters))
	// nb_snapshots (60) and snapshots_offset (64) stay 0.
	// incompatible (72), compatible (80) and autoclear (88) features stay 0.
	be.PutUint32(b[96:], refcountOrder)
	be.PutUint32(b[100:], headerLength)

	p := headerLength
	if h.backingFormat != "" {
		be.PutUint32(b[p:], extBackingFormat)
		be.PutUint32(b[p+4:], uint32(len(h.backingFormat)))
		copy(b[p+8:], h.backingFormat)
		p += 8 + pad8(len(h.backingFormat))
	}
	be.PutUint32(b[p:], extEnd) // end of extensions: type 0, length 0
	p += 8
	if h.backingFile != "" {
		be.PutUint64(b[8:], uint64(p))
		be.PutUint32(b[16:], uint32(len(h.backingFile)))
		copy(b[p:], h.backingFile)
	}
	return b
}

// writeMetadata writes the header, L2 tables, L1 table and refcount
// structures of l, for data clusters allocated as runs.
func writeMetadata(dst io.WriterAt, l layout, h header, runs []run) error {
	cs := l.clusterSize
	be := binary.BigEndian
	buf := make([]byte, cs)

	// L2 tables, one per L1 entry that maps any data, in guest order. Host
	// data clusters are numbered from 1 in the order of runs.
	l1 := make([]byte, l.l1Clusters*cs)
	host := int64(1)
	l2Index := int64(0)
	cur := int64(-1) // L1 index whose table is in buf
	flush := func() error {
		if cur < 0 {
			return nil
		}
		off := l.l2Offset + l2Index*cs
		if _, err := dst.WriteAt(buf, off); err != nil {
			return fmt.Errorf("qcow2: writing L2 table at %d: %w", off, err)
		}
		be.PutUint64(l1[cur*8:], uint64(off)|flagCopied)
		l2Index++
		clear(buf)
		return nil
	}
	for _, r := range runs {
		for g := r.guest; g < r.guest+r.n; g++ {
			if i := g / l.l2Entries; i != cur {
				if err := flush(); err != nil {
					return err
				}
				cur = i
			}
			be.PutUint64(buf[(g%l.l2Entries)*8:], uint64(host*cs)|flagCopied)
			host++
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if len(l1) > 0 {
		if _, err := dst.WriteAt(l1, l.l1Offset); err != nil {
			return fmt.Errorf("qcow2: writing L1 table at %d: %w", l.l1Offset, err)
		}
	}

	// Refcount table, then blocks: every cluster in the file is used once.
	rt := make([]byte, l.rtClusters*cs)
	for i := range l.rbCount {
		be.PutUint64(rt[i*8:], uint64(l.rbOffset+i*cs))
	}
	if _, err := dst.WriteAt(rt, l.rtOffset); err != nil {
		return fmt.Errorf("qcow2: writing refcount table at %d: %w", l.rtOffset, err)
	}
	perBlock := cs / refcountBytes
	for i := range l.rbCount {
		clear(buf)
		for j := range perBlock {
			if i*perBlock+j >= l.total {
				break
			}
			be.PutUint16(buf[j*refcountBytes:], 1)
		}
		off := l.rbOffset + i*cs
		if _, err := dst.WriteAt(buf, off); err != nil {
			return fmt.Errorf("qcow2: writing refcount block at %d: %w", off, err)
		}
	}

	// The header goes last, so that an interrupted write leaves no valid image.
	if _, err := dst.WriteAt(h.encode(l), 0); err != nil {
		return fmt.Errorf("qcow2: writing header: %w", err)
	}
	return nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func pad8(n int) int { return (n + 7) &^ 7 }
