package archive

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Compression is a stream compression, told by its magic bytes.
type Compression string

// Compressions. None means the bytes are used as they are.
const (
	None  Compression = ""
	Gzip  Compression = "gzip"
	Xz    Compression = "xz"
	Zstd  Compression = "zstd"
	Bzip2 Compression = "bzip2"
)

// Ext is the file name suffix the compression conventionally has
// (".xz"), or "" for None.
func (c Compression) Ext() string {
	switch c {
	case Gzip:
		return ".gz"
	case Xz:
		return ".xz"
	case Zstd:
		return ".zst"
	case Bzip2:
		return ".bz2"
	}
	return ""
}

// zstdMaxWindow bounds the memory a zstd stream may ask for. zstd --long
// uses 128 MiB windows; nothing an archive needs goes beyond that.
const zstdMaxWindow = 1 << 28

// DetectCompression tells the compression of a stream from its first
// bytes: None when they carry no known magic.
func DetectCompression(head []byte) Compression {
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return Gzip
	case bytes.HasPrefix(head, magicXz):
		return Xz
	case bytes.HasPrefix(head, magicZstd):
		return Zstd
	case bytes.HasPrefix(head, magicBzip2):
		return Bzip2
	}
	return None
}

// Decompress returns r's bytes decompressed, telling the compression from
// their magic bytes, and r's bytes as they are when they carry none. Close
// releases the decoder; it does not close r.
func Decompress(r io.Reader) (io.ReadCloser, Compression, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, err := br.Peek(8)
	if err != nil && err != io.EOF {
		return nil, None, err
	}
	c := DetectCompression(head)
	rc, err := decompressor(br, c)
	return rc, c, err
}

// decompressor returns a reader decompressing br with c. br must be
// buffered: the gzip reader then reads no byte past its stream.
func decompressor(br *bufio.Reader, c Compression) (io.ReadCloser, error) {
	switch c {
	case None:
		return io.NopCloser(br), nil
	case Gzip:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case Xz:
		zr, err := xz.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("xz: %w", err)
		}
		return io.NopCloser(zr), nil
	case Zstd:
		zr, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zstdCloser{zr}, nil
	case Bzip2:
		return io.NopCloser(bzip2.NewReader(br)), nil
	}
	return nil, fmt.Errorf("unknown compression %q", c)
}

type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error { z.Decoder.Close(); return nil }
