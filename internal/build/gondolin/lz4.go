package gondolin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
)

const (
	legacyMagic = 0x184C2102
	// LegacyBlockSize is how much input each legacy LZ4 block holds; the
	// kernel's decompressor expects exactly this much from every block but
	// the last.
	LegacyBlockSize = 8 << 20
)

// CompressLegacyLZ4 compresses src into dst in the legacy LZ4 format that
// the Linux kernel unpacks initramfs images from (what `lz4 -l` writes).
// The output depends only on the input bytes.
func CompressLegacyLZ4(dst io.Writer, src io.Reader) error {
	var word [4]byte
	binary.LittleEndian.PutUint32(word[:], legacyMagic)
	if _, err := dst.Write(word[:]); err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	in := make([]byte, LegacyBlockSize)
	out := make([]byte, lz4.CompressBlockBound(LegacyBlockSize))
	for block := 0; ; block++ {
		n, rerr := io.ReadFull(src, in)
		if n > 0 {
			// With out at the bound, every block compresses (an
			// incompressible one grows a little); legacy framing has no
			// way to store a block as is.
			c, err := lz4.CompressBlock(in[:n], out, nil)
			if err != nil || c == 0 {
				return fmt.Errorf("lz4: compressing block %d: %v", block, err)
			}
			binary.LittleEndian.PutUint32(word[:], uint32(c))
			if _, err := dst.Write(word[:]); err != nil {
				return fmt.Errorf("lz4: %w", err)
			}
			if _, err := dst.Write(out[:c]); err != nil {
				return fmt.Errorf("lz4: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("lz4: reading input: %w", rerr)
		}
	}
}
