package layers

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Layer is one layer blob as an image manifest lists it.
type Layer struct {
	// Name identifies the layer in errors, such as its digest.
	Name string
	// MediaType is the descriptor's media type. It must name a layer
	// (OCI or Docker); an empty media type is accepted.
	MediaType string
	// Open returns the blob, compressed as stored.
	Open func() (io.ReadCloser, error)
}

// FileLayer is a layer read from a blob file.
func FileLayer(path, mediaType string) Layer {
	return Layer{
		Name:      path,
		MediaType: mediaType,
		Open:      func() (io.ReadCloser, error) { return os.Open(path) },
	}
}

// checkMediaType accepts the media types of tar layers, compressed or not.
func checkMediaType(mt string) error {
	if mt == "" {
		return nil
	}
	switch {
	case strings.HasPrefix(mt, "application/vnd.oci.image.layer.") && strings.Contains(mt, ".tar"),
		strings.HasPrefix(mt, "application/vnd.docker.image.rootfs.") && strings.Contains(mt, ".tar"):
		return nil
	}
	return fmt.Errorf("media type %q is not a tar layer", mt)
}

// zstdMaxWindow bounds the memory a zstd frame may ask for.
const zstdMaxWindow = 1 << 28

// decompress returns the tar stream inside r, telling gzip and zstd by
// their magic bytes. The returned closer releases the decoder.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, nil, err
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}
