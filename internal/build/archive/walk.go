package archive

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// WalkFunc is called for each entry of an archive's file tree. body reads
// the entry's bytes and is valid only until fn returns; it is empty for
// anything but a regular file. Returning fs.SkipAll ends the walk without
// error; any other error ends it and Walk returns that error as it is.
type WalkFunc func(hdr *tar.Header, body io.Reader) error

// Walk calls fn for each entry of the file tree of the archive read from
// r, in archive order, detecting the format from its magic bytes (see
// Detect). Entry names are cleaned: a leading "./" is stripped and the
// path cleaned, so "./usr//bin/" is visited as "usr/bin"; the root entry
// itself is skipped. Hard link targets are cleaned the same way; symlink
// targets are passed as they are. Unsafe names (absolute, or escaping with
// "..") are passed through unchanged for the caller to judge with
// CheckEntry. pax global headers are skipped.
func Walk(r io.Reader, fn WalkFunc) error {
	br := bufio.NewReaderSize(r, detectLen)
	head, err := br.Peek(detectLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return err
	}
	f, err := Detect(head)
	if err != nil {
		return err
	}
	switch f {
	case Deb:
		return walkDeb(br, fn)
	case APK:
		return walkAPK(br, fn)
	}
	zr, err := decompressor(br, DetectCompression(head))
	if err != nil {
		return err
	}
	defer zr.Close()
	_, err = walkTar(zr, fn)
	return err
}

// WalkFile is Walk over the archive at path; errors from reading the
// archive name it, errors from fn are returned as they are.
func WalkFile(name string, fn WalkFunc) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	var fnErr error
	err = Walk(f, func(hdr *tar.Header, body io.Reader) error {
		if err := fn(hdr, body); err != nil {
			fnErr = err
			return err
		}
		return nil
	})
	if err != nil && fnErr == nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return err
}

// walkTar walks one tar stream. It returns whether fn asked to stop.
func walkTar(r io.Reader, fn WalkFunc) (stopped bool, err error) {
	tr := tar.NewReader(r)
	last := ""
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			if last == "" {
				return false, fmt.Errorf("tar: %w", err)
			}
			return false, fmt.Errorf("tar: after entry %q: %w", last, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		last = hdr.Name
		hdr.Name = CleanName(hdr.Name)
		if hdr.Name == "." {
			continue
		}
		if hdr.Typeflag == tar.TypeLink {
			hdr.Linkname = CleanName(hdr.Linkname)
		}
		if err := fn(hdr, tr); err != nil {
			if errors.Is(err, fs.SkipAll) {
				return true, nil
			}
			return true, err
		}
	}
}

// CleanName cleans an archive entry name the way Walk does: leading "./"
// stripped, the path cleaned, "." for the root. Absolute and escaping
// names stay recognisable ("/etc/x", "../x").
func CleanName(name string) string {
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	if name == "" {
		return "."
	}
	return path.Clean(name)
}

// walkDeb walks the data.tar member of a Debian package.
func walkDeb(br *bufio.Reader, fn WalkFunc) error {
	found := false
	err := arMembers(br, func(name string, body *bufio.Reader) (bool, error) {
		if !strings.HasPrefix(name, "data.tar") {
			return false, nil
		}
		found = true
		zr, err := decompressor(body, sniff(body))
		if err != nil {
			return true, fmt.Errorf("deb member %s: %w", name, err)
		}
		defer zr.Close()
		stopped, err := walkTar(zr, fn)
		if err != nil && !stopped {
			return true, fmt.Errorf("deb member %s: %w", name, err)
		}
		return true, err
	})
	if err != nil {
		return err
	}
	if !found {
		return errors.New("deb has no data.tar member")
	}
	return nil
}

func sniff(br *bufio.Reader) Compression {
	head, _ := br.Peek(8)
	return DetectCompression(head)
}

// arMembers calls fn for each member of the ar archive read from br, with
// the member's name (trailing "/" removed) and a buffered reader over its
// bytes. fn returns true to stop.
func arMembers(br *bufio.Reader, fn func(name string, body *bufio.Reader) (stop bool, err error)) error {
	var magic [8]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil || string(magic[:]) != string(magicAr) {
		return errors.New("not an ar archive")
	}
	for i := 0; ; i++ {
		var h [60]byte
		n, err := io.ReadFull(br, h[:])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ar: member %d header: %w (read %d bytes)", i, err, n)
		}
		if h[58] != '`' || h[59] != '\n' {
			return fmt.Errorf("ar: member %d: bad header", i)
		}
		name := strings.TrimSuffix(strings.TrimRight(string(h[0:16]), " "), "/")
		var size int64
		if _, err := fmt.Sscanf(strings.TrimRight(string(h[48:58]), " "), "%d", &size); err != nil || size < 0 {
			return fmt.Errorf("ar: member %q: bad size %q", name, strings.TrimSpace(string(h[48:58])))
		}
		if i == 0 && name != "debian-binary" {
			return fmt.Errorf("not a Debian package: first ar member is %q, want debian-binary", name)
		}
		lr := &io.LimitedReader{R: br, N: size}
		stop, err := fn(name, bufio.NewReaderSize(lr, 1<<16))
		if err != nil || stop {
			return err
		}
		if _, err := io.Copy(io.Discard, lr); err != nil {
			return fmt.Errorf("ar: member %q: %w", name, err)
		}
		if lr.N > 0 {
			return fmt.Errorf("ar: member %q: truncated", name)
		}
		if size%2 == 1 {
			if _, err := br.Discard(1); err != nil && err != io.EOF {
				return err
			}
		}
	}
}

// walkAPK walks the data segment of an Alpine package: the gzip streams
// after the signature and control segments.
func walkAPK(br *bufio.Reader, fn WalkFunc) error {
	zr, err := gzip.NewReader(br)
	if err != nil {
		return fmt.Errorf("apk: %w", err)
	}
	defer zr.Close()
	for seg := 0; ; seg++ {
		zr.Multistream(false)
		meta := false
		first := true
		stopped, err := walkTar(zr, func(hdr *tar.Header, body io.Reader) error {
			if first {
				first = false
				meta = isAPKMeta(hdr.Name)
			}
			if meta {
				return nil
			}
			return fn(hdr, body)
		})
		if err != nil {
			if stopped {
				return err
			}
			return fmt.Errorf("apk segment %d: %w", seg, err)
		}
		if stopped {
			return nil
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			return fmt.Errorf("apk segment %d: %w", seg, err)
		}
		if err := zr.Reset(br); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("apk segment %d: %w", seg+1, err)
		}
	}
}

// isAPKMeta reports whether name opens an .apk signature or control
// segment.
func isAPKMeta(name string) bool {
	return name == ".PKGINFO" || strings.HasPrefix(name, ".SIGN.")
}
