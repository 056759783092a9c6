package archivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/ulikunitz/xz"
)

// Entry is one archive entry. Type defaults to a regular file (a
// directory when Name ends in "/"), Mode to 0644 (0755 for directories).
type Entry struct {
	Name     string
	Body     string
	Type     byte
	Mode     int64
	Linkname string
}

// epoch is the modification time of every entry, so archives are
// reproducible.
var epoch = time.Unix(1700000000, 0).UTC()

// Tar returns a tar archive of entries, with its end-of-archive blocks.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	return writeTar(t, true, entries)
}

// writeTar writes entries; without end, the archive stops after the last
// entry as .apk signature and control segments do.
func writeTar(t testing.TB, end bool, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.Name,
			Typeflag: e.Type,
			Mode:     e.Mode,
			Linkname: e.Linkname,
			ModTime:  epoch,
			Uname:    "root",
			Gname:    "root",
			Format:   tar.FormatGNU,
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			if len(e.Name) > 0 && e.Name[len(e.Name)-1] == '/' {
				h.Typeflag = tar.TypeDir
			}
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %s: %v", e.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatalf("tar body %s: %v", e.Name, err)
			}
		}
	}
	var err error
	if end {
		err = tw.Close()
	} else {
		err = tw.Flush()
	}
	if err != nil {
		t.Fatalf("tar: %v", err)
	}
	return buf.Bytes()
}

// Compress compresses data with c: gzip, xz or zstd (None returns data).
func Compress(t testing.TB, c archive.Compression, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	switch c {
	case archive.None:
		return data
	case archive.Gzip:
		zw := gzip.NewWriter(&buf)
		if _, err = zw.Write(data); err == nil {
			err = zw.Close()
		}
	case archive.Xz:
		var zw *xz.Writer
		if zw, err = xz.NewWriter(&buf); err == nil {
			if _, err = zw.Write(data); err == nil {
				err = zw.Close()
			}
		}
	case archive.Zstd:
		var zw *zstd.Encoder
		if zw, err = zstd.NewWriter(&buf); err == nil {
			if _, err = zw.Write(data); err == nil {
				err = zw.Close()
			}
		}
	default:
		t.Fatalf("archivetest cannot write %s", c)
	}
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return buf.Bytes()
}

// Deb returns a Debian package: debian-binary, control.tar.gz holding
// ./control with the given text, and data.tar compressed with c holding
// entries.
func Deb(t testing.TB, control string, c archive.Compression, entries ...Entry) []byte {
	t.Helper()
	ctl := Compress(t, archive.Gzip, Tar(t, Entry{Name: "./"}, Entry{Name: "./control", Body: control}))
	data := Compress(t, c, Tar(t, entries...))
	return Ar(t,
		ArMember{Name: "debian-binary", Body: []byte("2.0\n")},
		ArMember{Name: "control.tar.gz", Body: ctl},
		ArMember{Name: "data.tar" + c.Ext(), Body: data})
}

// ArMember is one member of an ar archive.
type ArMember struct {
	Name string
	Body []byte
}

// Ar returns an ar archive of members, in the common format dpkg writes.
func Ar(t testing.TB, members ...ArMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("!<arch>\n")
	for _, m := range members {
		if len(m.Name) > 16 {
			t.Fatalf("ar member name %q longer than 16 bytes", m.Name)
		}
		fmt.Fprintf(&buf, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", m.Name, epoch.Unix(), 0, 0, 0o100644, len(m.Body))
		buf.Write(m.Body)
		if len(m.Body)%2 == 1 {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// APK returns an Alpine package: a signature segment (when signed), a
// control segment holding .PKGINFO with the given text, and a data
// segment holding entries, each its own gzip stream. The signature and
// control tars stop without end-of-archive blocks, as abuild writes them.
func APK(t testing.TB, pkginfo string, signed bool, entries ...Entry) []byte {
	t.Helper()
	var out []byte
	if signed {
		out = append(out, Compress(t, archive.Gzip, writeTar(t, false, []Entry{
			{Name: ".SIGN.RSA.test@example.com-00000000.rsa.pub", Body: string(bytes.Repeat([]byte{0xa5}, 256))},
		}))...)
	}
	out = append(out, Compress(t, archive.Gzip, writeTar(t, false, []Entry{
		{Name: ".PKGINFO", Body: pkginfo},
		{Name: ".post-install", Body: "#!/bin/sh\n", Mode: 0o755},
	}))...)
	out = append(out, Compress(t, archive.Gzip, writeTar(t, true, entries))...)
	return out
}
