package archive

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Format is an archive format, told by its magic bytes.
type Format string

// Formats.
const (
	Tar      Format = "tar"
	TarGzip  Format = "tar+gzip"
	TarXz    Format = "tar+xz"
	TarZstd  Format = "tar+zstd"
	TarBzip2 Format = "tar+bzip2"
	Deb      Format = "deb"
	APK      Format = "apk"
)

// Magic numbers.
var (
	magicAr    = []byte("!<arch>\n")
	magicGzip  = []byte{0x1f, 0x8b}
	magicXz    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicBzip2 = []byte("BZh")
	magicADB   = []byte("ADB")
)

// detectLen is how many leading bytes Detect wants to see. The first gzip
// stream of an .apk (its signature or control segment) must decompress to
// at least one tar header from these.
const detectLen = 64 << 10

// Detect tells the format of an archive from its first bytes (up to 64 KiB
// of them; fewer only if the archive is shorter). A gzip stream is an .apk
// when its first tar entry is .SIGN.* or .PKGINFO, and a compressed tar
// otherwise; the tar inside a compressed stream is checked when it starts
// within head.
func Detect(head []byte) (Format, error) {
	switch {
	case bytes.HasPrefix(head, magicAr):
		return Deb, nil
	case bytes.HasPrefix(head, magicGzip):
		return detectGzip(head)
	case bytes.HasPrefix(head, magicXz):
		return TarXz, nil
	case bytes.HasPrefix(head, magicZstd):
		return TarZstd, nil
	case bytes.HasPrefix(head, magicBzip2):
		return TarBzip2, nil
	case bytes.HasPrefix(head, magicADB):
		return "", fmt.Errorf("apk v3 (ADB) packages are not supported; use a v2 .apk")
	case isTarHeader(head):
		return Tar, nil
	case len(head) == 0:
		return "", fmt.Errorf("empty archive")
	}
	n := min(len(head), 8)
	return "", fmt.Errorf("unknown archive format (first bytes %x): want tar, gzip/xz/zstd/bzip2 tar, .deb or .apk", head[:n])
}

func detectGzip(head []byte) (Format, error) {
	zr, err := gzip.NewReader(bytes.NewReader(head))
	if err != nil {
		return "", fmt.Errorf("gzip: %w", err)
	}
	zr.Multistream(false)
	var blk [512]byte
	n, err := io.ReadFull(zr, blk[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("gzip: %w", err)
	}
	name := tarName(blk[:n])
	if strings.HasPrefix(name, ".SIGN.") || name == ".PKGINFO" {
		return APK, nil
	}
	if n == len(blk) && !isTarHeader(blk[:]) {
		return "", fmt.Errorf("gzip stream does not hold a tar archive")
	}
	return TarGzip, nil
}

// tarName returns the name field of a tar header, as far as b holds it.
func tarName(b []byte) string {
	b = b[:min(len(b), 100)]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// isTarHeader reports whether b starts with a tar header: the ustar magic
// or, for old v7 archives, a valid header checksum.
func isTarHeader(b []byte) bool {
	if len(b) < 512 {
		return false
	}
	if string(b[257:262]) == "ustar" {
		return true
	}
	field := strings.TrimRight(strings.TrimSpace(string(bytes.TrimRight(b[148:156], "\x00 "))), "\x00")
	want, err := strconv.ParseUint(field, 8, 32)
	if err != nil || field == "" {
		return false
	}
	var sum uint64
	for i, c := range b[:512] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += uint64(c)
	}
	return sum == want && tarName(b) != ""
}
