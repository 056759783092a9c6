package ext4

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/ctxio"
)

// Build writes an ext4 image of opts.Size bytes to w holding the tree the
// tar stream r describes, and returns what it wrote.
//
// Entries may come in any order as long as a hard link follows its target;
// parent directories missing from the stream are created with mode 0755,
// owner 0:0 and time opts.Epoch. A directory listed twice takes the
// metadata of its last entry; any other path listed twice is an error.
// Names with a ".." element are errors. Build applies no whiteouts.
//
// If w has a Truncate method (as *os.File does), Build first truncates it
// to zero and then to opts.Size, so blocks it does not write read as
// zeros; otherwise w must read as zeros where Build does not write (a new
// file or buffer) for the image to be reproducible. Build writes file data
// as it reads r and keeps only metadata in memory.
//
// Once ctx ends, Build returns its error at the next read of r or write
// to w, each at most a megabyte, and writes nothing more: what w holds
// then is not an image, and the caller discards it.
func Build(ctx context.Context, w io.WriterAt, r io.Reader, opts Options) (Stats, error) {
	b, err := newBuilder(ctx, w, opts)
	if err != nil {
		return Stats{}, err
	}
	tr := tar.NewReader(ctxio.Reader(ctx, r))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Stats{}, fmt.Errorf("ext4: reading tar stream: %w", err)
		}
		if err := b.add(hdr, tr); err != nil {
			return Stats{}, fmt.Errorf("ext4: tar entry %q: %w", hdr.Name, err)
		}
	}
	return b.finish()
}

// builder holds an image while Build writes it.
type builder struct {
	w      io.WriterAt
	opts   Options
	ge     geometry
	al     *allocator
	zeroed bool     // w was truncated: unwritten blocks read as zeros
	inodes []*inode // by inode number - 1; nil for unused reserved inodes
	paths  map[string]uint32
	buf    []byte
	stats  Stats
}

func newBuilder(ctx context.Context, w io.WriterAt, opts Options) (*builder, error) {
	if opts.Size <= 0 || opts.Size%blockSize != 0 {
		return nil, fmt.Errorf("ext4: image size %d is not a positive multiple of %d bytes", opts.Size, blockSize)
	}
	if len(opts.Label) > 16 {
		return nil, fmt.Errorf("ext4: volume label %q is longer than 16 bytes", opts.Label)
	}
	if opts.InodeRatio == 0 {
		opts.InodeRatio = defaultInodeRatio
	}
	if opts.InodeRatio < 1024 {
		return nil, fmt.Errorf("ext4: inode ratio %d is below 1024 bytes per inode", opts.InodeRatio)
	}
	if opts.JournalBlocks != 0 && opts.JournalBlocks < 1024 {
		return nil, fmt.Errorf("ext4: journal of %d blocks is smaller than the 1024 blocks jbd2 needs", opts.JournalBlocks)
	}
	ge, err := newGeometry(uint64(opts.Size/blockSize), uint64(opts.Size/opts.InodeRatio))
	if err != nil {
		return nil, err
	}
	b := &builder{
		w:     ctxio.WriterAt(ctx, w),
		opts:  opts,
		ge:    ge,
		paths: map[string]uint32{},
		buf:   make([]byte, 1<<20),
	}
	b.al = newAllocator(&b.ge)
	if t, ok := w.(interface{ Truncate(int64) error }); ok {
		if err := t.Truncate(0); err != nil {
			return nil, fmt.Errorf("ext4: truncating the image: %w", err)
		}
		if err := t.Truncate(opts.Size); err != nil {
			return nil, fmt.Errorf("ext4: sizing the image: %w", err)
		}
		b.zeroed = true
	} else if _, err := w.WriteAt([]byte{0}, opts.Size-1); err != nil {
		return nil, fmt.Errorf("ext4: sizing the image: %w", err)
	}
	b.stats.Size = opts.Size

	epoch := timestamp{sec: opts.Epoch}
	b.inodes = make([]*inode, firstIno-1)
	root := &inode{mode: sIFDIR | 0o755, links: 2, time: epoch, parent: rootIno, name: "/", ino: rootIno}
	b.inodes[rootIno-1] = root
	b.paths[""] = rootIno
	b.stats.Dirs++
	if opts.JournalBlocks > 0 {
		if err := b.addJournal(epoch); err != nil {
			return nil, err
		}
	}
	lf := b.newInode(sIFDIR|0o700, "/lost+found")
	lf.links, lf.time, lf.parent = 2, epoch, rootIno
	root.links++
	root.entries = append(root.entries, dirent{"lost+found", lostFoundIno, 2})
	b.paths["lost+found"] = lostFoundIno
	b.stats.Dirs++
	return b, nil
}

// newInode appends an inode with the next free number.
func (b *builder) newInode(mode uint16, name string) *inode {
	n := &inode{mode: mode, name: name, links: 1, ino: uint32(len(b.inodes) + 1)}
	b.inodes = append(b.inodes, n)
	return n
}

func (b *builder) get(ino uint32) *inode { return b.inodes[ino-1] }

// cleanPath turns a tar name into a path relative to the root, "" for
// the root itself.
func cleanPath(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", errors.New("name contains a NUL byte")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New(`name has a ".." element`)
		}
	}
	return strings.TrimPrefix(path.Clean("/"+name), "/"), nil
}

func parentOf(p string) string {
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// clamp turns a tar time into an inode time no later than the epoch.
func (b *builder) clamp(t time.Time) timestamp {
	if t.IsZero() || t.After(time.Unix(b.opts.Epoch, 0)) {
		return timestamp{sec: b.opts.Epoch}
	}
	return timestamp{sec: t.Unix(), nsec: uint32(t.Nanosecond())}
}

// dir returns the directory at p, creating it and its parents if the
// stream did not list them.
func (b *builder) dir(p string) (uint32, error) {
	if ino, ok := b.paths[p]; ok {
		if !b.get(ino).isDir() {
			return 0, fmt.Errorf("parent /%s is not a directory", p)
		}
		return ino, nil
	}
	pino, err := b.dir(parentOf(p))
	if err != nil {
		return 0, err
	}
	n := b.newInode(sIFDIR|0o755, "/"+p)
	n.links, n.time, n.parent = 2, timestamp{sec: b.opts.Epoch}, pino
	b.link(pino, p, n)
	b.stats.Dirs++
	return n.ino, nil
}

// link names n as p in directory pino.
func (b *builder) link(pino uint32, p string, n *inode) {
	ino := n.ino
	parent := b.get(pino)
	parent.entries = append(parent.entries, dirent{path.Base(p), ino, n.fileType()})
	if n.isDir() {
		parent.links++
	}
	b.paths[p] = ino
}

func (b *builder) add(hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	}
	p, err := cleanPath(hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Uid < 0 || int64(hdr.Uid) > 1<<32-1 || hdr.Gid < 0 || int64(hdr.Gid) > 1<<32-1 {
		return fmt.Errorf("uid %d or gid %d out of range", hdr.Uid, hdr.Gid)
	}
	xs, err := xattrsFromPAX(hdr.PAXRecords)
	if err != nil {
		return err
	}
	setMeta := func(n *inode) {
		n.mode = n.mode&sIFMT | uint16(hdr.Mode&0o7777)
		n.uid, n.gid = uint32(hdr.Uid), uint32(hdr.Gid)
		n.time = b.clamp(hdr.ModTime)
		n.xattrs = xs
	}
	if ino, ok := b.paths[p]; ok {
		if n := b.get(ino); n.isDir() && hdr.Typeflag == tar.TypeDir {
			setMeta(n)
			return nil
		}
		return fmt.Errorf("/%s is listed more than once", p)
	}
	base := path.Base(p)
	if len(base) > 255 {
		return fmt.Errorf("name %.40s... is longer than 255 bytes", base)
	}
	pino, err := b.dir(parentOf(p))
	if err != nil {
		return err
	}

	var n *inode
	switch hdr.Typeflag {
	case tar.TypeDir:
		n = b.newInode(sIFDIR, "/"+p)
		n.links, n.parent = 2, pino
		b.stats.Dirs++
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse: // the reader turns the old TypeRegA into TypeReg
		n = b.newInode(sIFREG, "/"+p)
		if err := b.writeFile(n, r, hdr.Size); err != nil {
			return err
		}
		b.stats.Files++
		b.stats.DataBytes += hdr.Size
	case tar.TypeSymlink:
		n = b.newInode(sIFLNK, "/"+p)
		if err := b.writeSymlink(n, hdr.Linkname); err != nil {
			return err
		}
		b.stats.Symlinks++
	case tar.TypeLink:
		return b.hardLink(pino, p, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		mode := uint16(sIFCHR)
		if hdr.Typeflag == tar.TypeBlock {
			mode = sIFBLK
		}
		if hdr.Devmajor < 0 || hdr.Devmajor >= 1<<12 || hdr.Devminor < 0 || hdr.Devminor >= 1<<20 {
			return fmt.Errorf("device number %d:%d out of range", hdr.Devmajor, hdr.Devminor)
		}
		n = b.newInode(mode, "/"+p)
		n.setDevice(uint32(hdr.Devmajor), uint32(hdr.Devminor))
		b.stats.Devices++
	case tar.TypeFifo:
		n = b.newInode(sIFIFO, "/"+p)
		b.stats.FIFOs++
	default:
		return fmt.Errorf("tar entry type %q is not supported", hdr.Typeflag)
	}
	setMeta(n)
	b.link(pino, p, n)
	return nil
}

func (b *builder) hardLink(pino uint32, p, target string) error {
	tp, err := cleanPath(target)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	tino, ok := b.paths[tp]
	if !ok {
		return fmt.Errorf("hard link target /%s is not in the stream before the link", tp)
	}
	t := b.get(tino)
	if t.isDir() {
		return fmt.Errorf("hard link target /%s is a directory", tp)
	}
	if t.links >= maxLinks {
		return fmt.Errorf("hard link target /%s has %d links, the most ext4 allows", tp, maxLinks)
	}
	t.links++
	parent := b.get(pino)
	parent.entries = append(parent.entries, dirent{path.Base(p), tino, t.fileType()})
	b.paths[p] = tino
	b.stats.HardLinks++
	return nil
}

// full reports whether the tree has outgrown the image; from then on
// Build only counts what the tree needs.
func (b *builder) full() bool {
	return b.al.overflow > 0 || len(b.inodes) > int(b.ge.inodes())
}

// writeFile copies size bytes of r into newly allocated blocks of n.
func (b *builder) writeFile(n *inode, r io.Reader, size int64) error {
	if size < 0 {
		return fmt.Errorf("negative size %d", size)
	}
	n.size = uint64(size)
	nblocks := (uint64(size) + blockSize - 1) / blockSize
	runs, ok := b.al.alloc(nblocks)
	if !ok || b.full() {
		// Only count: a file spread over more than four extents needs
		// extent tree blocks as well.
		if ext := nblocks/uint64(blocksPerGroup-b.ge.overhead(1)) + 2; ext > extentsInInode {
			b.al.alloc((ext + extentsInBlock - 1) / extentsInBlock)
		}
		return nil
	}
	left := size
	for _, rn := range runs {
		pos := int64(rn.start) * blockSize
		end := pos + int64(rn.len)*blockSize
		for pos < end {
			chunk := min(int64(len(b.buf)), end-pos)
			data := min(chunk, left)
			if _, err := io.ReadFull(r, b.buf[:data]); err != nil {
				return fmt.Errorf("reading %d bytes of content: %w", size, err)
			}
			clear(b.buf[data:chunk])
			if _, err := b.w.WriteAt(b.buf[:chunk], pos); err != nil {
				return fmt.Errorf("writing the image: %w", err)
			}
			left -= data
			pos += chunk
		}
	}
	return b.setExtents(n, runs)
}

// writeSymlink stores a link target in the inode (fast symlink) when it
// is shorter than 60 bytes, else in a data block.
func (b *builder) writeSymlink(n *inode, target string) error {
	switch {
	case target == "":
		return errors.New("symbolic link with an empty target")
	case len(target) >= blockSize:
		return fmt.Errorf("symbolic link target of %d bytes is longer than %d", len(target), blockSize-1)
	}
	n.size = uint64(len(target))
	if len(target) < len(n.iblock) {
		copy(n.iblock[:], target)
		return nil
	}
	blk, ok := b.al.alloc(1)
	if !ok || b.full() {
		return nil
	}
	buf := make([]byte, blockSize)
	copy(buf, target)
	if err := b.writeBlocks(blk[0].start, buf); err != nil {
		return err
	}
	return b.setExtents(n, blk)
}

// writeBlocks writes data, a whole number of blocks, at block blk.
func (b *builder) writeBlocks(blk uint32, data []byte) error {
	if _, err := b.w.WriteAt(data, int64(blk)*blockSize); err != nil {
		return fmt.Errorf("ext4: writing the image: %w", err)
	}
	return nil
}

// finish writes directories, attribute blocks and the metadata.
func (b *builder) finish() (Stats, error) {
	for _, n := range b.inodes {
		if n == nil || !n.isDir() {
			continue
		}
		ino := n.ino
		minBlocks := 1
		if ino == lostFoundIno {
			minBlocks = 4 // room to reconnect files without allocating, as mke2fs leaves
		}
		data := packDir(ino, n.parent, n.entries, minBlocks)
		n.entries = nil
		n.size = uint64(len(data))
		runs, ok := b.al.alloc(uint64(len(data) / blockSize))
		if !ok || b.full() {
			continue
		}
		for _, r := range runs {
			if err := b.writeBlocks(r.start, data[:r.len*blockSize]); err != nil {
				return Stats{}, err
			}
			data = data[r.len*blockSize:]
		}
		if err := b.setExtents(n, runs); err != nil {
			return Stats{}, err
		}
	}
	for _, n := range b.inodes {
		if n == nil || len(n.xattrs) == 0 || fitsInInode(n.xattrs) {
			continue
		}
		if !fitsInBlock(n.xattrs) {
			return Stats{}, fmt.Errorf("ext4: %s: extended attributes take %d bytes, more than one %d-byte block holds",
				n.name, xattrsSize(n.xattrs), blockSize)
		}
		blk, ok := b.al.alloc(1)
		if !ok || b.full() {
			continue
		}
		if err := b.writeBlocks(blk[0].start, xattrBlock(n.xattrs)); err != nil {
			return Stats{}, err
		}
		n.xattrBlock = blk[0].start
		n.blocks++
		b.stats.XattrBlocks++
	}
	if b.full() {
		return Stats{}, b.fitError()
	}
	return b.writeMetadata()
}

// fitError says how large an image the tree needs.
func (b *builder) fitError() error {
	needBlocks := b.al.used + b.al.overflow
	needInodes := uint64(len(b.inodes))
	e := &FitError{Size: b.opts.Size, Blocks: needBlocks, Inodes: needInodes, Reason: "blocks"}
	if needInodes > uint64(b.ge.inodes()) {
		e.Reason = "inodes"
	}
	blocks := needBlocks + uint64(b.ge.overhead(0))
	for blocks < 1<<32 {
		ge, err := newGeometry(blocks, blocks*blockSize/uint64(b.opts.InodeRatio))
		if err == nil {
			dataShort := int64(needBlocks) - int64(ge.dataBlocks())
			inodesShort := int64(needInodes) - int64(ge.inodes())
			if dataShort <= 0 && inodesShort <= 0 {
				e.MinSize = int64(blocks) * blockSize
				return e
			}
			blocks += uint64(max(dataShort, inodesShort*b.opts.InodeRatio/blockSize, 1))
			continue
		}
		blocks += uint64(b.ge.overhead(0))
	}
	return e // more than a filesystem without the 64bit feature holds; MinSize stays 0
}
