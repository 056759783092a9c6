package ext4

import "fmt"

// Options say what image Build writes.
type Options struct {
	// Size is the image size in bytes and must be a multiple of 4096.
	// Everything beyond the tree's content is free space the guest can
	// use. Build fails with a *FitError when the tree does not fit.
	Size int64

	// Label is the volume label (at most 16 bytes), e.g. "gondolin-root".
	Label string

	// Seed determines the filesystem UUID and directory hash seed. Two
	// builds with the same seed and input write the same bytes; give each
	// image its own seed (e.g. its recipe hash) so their UUIDs differ.
	Seed []byte

	// Epoch is the build time in seconds since 1970-01-01 UTC (as in
	// SOURCE_DATE_EPOCH). The superblock's creation and check times and
	// every directory Build creates implicitly carry it; timestamps from
	// the tar stream later than it are clamped to it.
	Epoch int64

	// InodeRatio is the number of image bytes per inode; 0 means 16384,
	// as mke2fs uses. More files than inodes is a *FitError.
	InodeRatio int64

	// JournalBlocks, when not zero, adds an internal jbd2 journal of this
	// many 4 KiB blocks (1024 or more). Without a journal the image suits
	// a disk that lives for one sandbox: an unclean stop may need fsck.
	JournalBlocks uint32
}

// Stats describe an image Build wrote.
type Stats struct {
	Size        int64    // image bytes, Options.Size
	Blocks      uint32   // filesystem blocks of 4096 bytes
	FreeBlocks  uint32   // blocks free for the guest to use
	Inodes      uint32   // inodes in the filesystem
	FreeInodes  uint32   // inodes free for the guest to use
	UUID        [16]byte // the filesystem UUID derived from Options.Seed
	Files       int      // regular files (each inode once)
	Dirs        int      // directories, including / and /lost+found
	Symlinks    int      // symbolic links
	HardLinks   int      // extra names for an inode already written
	Devices     int      // character and block devices
	FIFOs       int      // named pipes
	DataBytes   int64    // bytes of regular file content
	XattrBlocks int      // extended attribute blocks (attributes too big for the inode)
}

// FitError reports a tree that does not fit in the requested image size.
type FitError struct {
	Size    int64  // the requested Options.Size
	MinSize int64  // an image size the tree fits in; 0 if none under 16 TiB
	Blocks  uint64 // data and metadata blocks the tree needs
	Inodes  uint64 // inodes the tree needs
	Reason  string // "blocks" or "inodes"
}

func (e *FitError) Error() string {
	if e.MinSize == 0 {
		return fmt.Sprintf("ext4: the tree needs %d blocks and %d inodes, more than an image of at most 16 TiB holds", e.Blocks, e.Inodes)
	}
	if e.Reason == "inodes" {
		return fmt.Sprintf("ext4: the tree needs %d inodes, more than an image of %d bytes holds at this inode ratio; it fits in %d bytes (%s) or with a smaller inode ratio",
			e.Inodes, e.Size, e.MinSize, human(e.MinSize))
	}
	return fmt.Sprintf("ext4: the tree needs %d blocks of 4096 bytes and does not fit in an image of %d bytes (%s); it needs at least %d bytes (%s)",
		e.Blocks, e.Size, human(e.Size), e.MinSize, human(e.MinSize))
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		suffix = s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
