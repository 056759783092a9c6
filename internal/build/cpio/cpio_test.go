package cpio

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// record is one parsed newc entry.
type record struct {
	ino, mode, uid, gid, nlink, mtime, size, devMajor, devMinor, rdevMajor, rdevMinor, check uint32
	name                                                                                     string
	data                                                                                     []byte
}

// parse reads a newc archive independently of the writer, checking magic,
// padding and the trailer.
func parse(t *testing.T, b []byte) []record {
	t.Helper()
	var out []record
	p := 0
	for {
		if p%4 != 0 {
			t.Fatalf("entry at %d is not 4-byte aligned", p)
		}
		if len(b)-p < 110 {
			t.Fatalf("truncated header at %d", p)
		}
		h := b[p : p+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], p)
		}
		var v [13]uint32
		for i := range v {
			x, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("field %d at %d: %v", i, p, err)
			}
			v[i] = uint32(x)
		}
		r := record{ino: v[0], mode: v[1], uid: v[2], gid: v[3], nlink: v[4], mtime: v[5], size: v[6],
			devMajor: v[7], devMinor: v[8], rdevMajor: v[9], rdevMinor: v[10], check: v[12]}
		namesize := int(v[11])
		nameEnd := p + 110 + namesize
		if b[nameEnd-1] != 0 {
			t.Fatalf("name at %d not NUL-terminated", p)
		}
		r.name = string(b[p+110 : nameEnd-1])
		dataStart := (nameEnd + 3) &^ 3
		for _, c := range b[nameEnd:dataStart] {
			if c != 0 {
				t.Fatalf("non-zero name padding after %q", r.name)
			}
		}
		dataEnd := dataStart + int(r.size)
		r.data = b[dataStart:dataEnd]
		p = (dataEnd + 3) &^ 3
		for _, c := range b[dataEnd:p] {
			if c != 0 {
				t.Fatalf("non-zero data padding after %q", r.name)
			}
		}
		if r.name == "TRAILER!!!" {
			if p != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-p)
			}
			return out
		}
		out = append(out, r)
	}
}

const epoch = 1700000000 // 2023-11-14T22:13:20Z

func sampleFiles() []File {
	return []File{
		{Entry: Entry{Name: "init", Mode: TypeRegular | 0o755, Size: 11}, Open: Bytes([]byte("#!/bin/sh\n\n"))},
		{Entry: Entry{Name: "bin/busybox", Mode: TypeRegular | 0o755, Size: 5}, Open: Bytes([]byte("ELF!!"))},
		{Entry: Entry{Name: "bin/sh", Mode: TypeSymlink | 0o777, Linkname: "busybox"}},
		{Entry: Entry{Name: "dev/console", Mode: TypeChar | 0o600, DevMajor: 5, DevMinor: 1}},
		{Entry: Entry{Name: "dev/vda", Mode: TypeBlock | 0o660, GID: 6, DevMajor: 254, DevMinor: 0}},
		{Entry: Entry{Name: "dev/initctl", Mode: TypeFIFO | 0o600}},
		{Entry: Entry{Name: "home/agent", Mode: TypeDir | 0o700, UID: 1000, GID: 1000}},
		{Entry: Entry{Name: "home/agent/.profile", Mode: TypeRegular | 0o644, UID: 1000, GID: 1000, Size: 0}},
		{Entry: Entry{Name: "tmp", Mode: TypeDir | 0o1777}},
		{Entry: Entry{Name: "usr/bin/su", Mode: TypeRegular | 0o4755, Size: 3}, Open: Bytes([]byte("su!"))},
		// Hard links, the data holder named after a link that sorts first.
		{Entry: Entry{Name: "usr/bin/zz", Mode: TypeRegular | 0o640, GID: 42, Size: 7}, Open: Bytes([]byte("linked\n"))},
		{Entry: Entry{Name: "sbin/aa", HardLink: "usr/bin/zz"}},
		{Entry: Entry{Name: "usr/bin/yy", HardLink: "usr/bin/zz"}},
	}
}

func TestWriteFiles(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFiles(&buf, epoch, sampleFiles()); err != nil {
		t.Fatal(err)
	}
	recs := parse(t, buf.Bytes())

	type want struct {
		name             string
		mode, uid, gid   uint32
		nlink            uint32
		data             string
		rdevMaj, rdevMin uint32
		sameInoAs        string
	}
	wants := []want{
		{name: "bin", mode: TypeDir | 0o755, nlink: 2},
		{name: "bin/busybox", mode: TypeRegular | 0o755, nlink: 1, data: "ELF!!"},
		{name: "bin/sh", mode: TypeSymlink | 0o777, nlink: 1, data: "busybox"},
		{name: "dev", mode: TypeDir | 0o755, nlink: 2},
		{name: "dev/console", mode: TypeChar | 0o600, nlink: 1, rdevMaj: 5, rdevMin: 1},
		{name: "dev/initctl", mode: TypeFIFO | 0o600, nlink: 1},
		{name: "dev/vda", mode: TypeBlock | 0o660, gid: 6, nlink: 1, rdevMaj: 254},
		{name: "home", mode: TypeDir | 0o755, nlink: 2},
		{name: "home/agent", mode: TypeDir | 0o700, uid: 1000, gid: 1000, nlink: 2},
		{name: "home/agent/.profile", mode: TypeRegular | 0o644, uid: 1000, gid: 1000, nlink: 1},
		{name: "init", mode: TypeRegular | 0o755, nlink: 1, data: "#!/bin/sh\n\n"},
		{name: "sbin", mode: TypeDir | 0o755, nlink: 2},
		{name: "sbin/aa", mode: TypeRegular | 0o640, gid: 42, nlink: 3, data: "linked\n"},
		{name: "tmp", mode: TypeDir | 0o1777, nlink: 2},
		{name: "usr", mode: TypeDir | 0o755, nlink: 2},
		{name: "usr/bin", mode: TypeDir | 0o755, nlink: 2},
		{name: "usr/bin/su", mode: TypeRegular | 0o4755, nlink: 1, data: "su!"},
		{name: "usr/bin/yy", mode: TypeRegular | 0o640, gid: 42, nlink: 3, sameInoAs: "sbin/aa"},
		{name: "usr/bin/zz", mode: TypeRegular | 0o640, gid: 42, nlink: 3, sameInoAs: "sbin/aa"},
	}
	if len(recs) != len(wants) {
		var names []string
		for _, r := range recs {
			names = append(names, r.name)
		}
		t.Fatalf("got %d entries %v, want %d", len(recs), names, len(wants))
	}
	inoOf := map[string]uint32{}
	seen := map[uint32]string{}
	next := uint32(1)
	for i, w := range wants {
		r := recs[i]
		inoOf[r.name] = r.ino
		if r.name != w.name || r.mode != w.mode || r.uid != w.uid || r.gid != w.gid || r.nlink != w.nlink ||
			string(r.data) != w.data || r.rdevMajor != w.rdevMaj || r.rdevMinor != w.rdevMin {
			t.Errorf("entry %d = %+v\nwant %+v", i, r, w)
		}
		if r.mtime != epoch || r.devMajor != 0 || r.devMinor != 0 || r.check != 0 {
			t.Errorf("%s: mtime %d, dev %d:%d, check %d", r.name, r.mtime, r.devMajor, r.devMinor, r.check)
		}
		if w.sameInoAs != "" {
			if r.ino != inoOf[w.sameInoAs] {
				t.Errorf("%s: inode %d, want %d as %s", r.name, r.ino, inoOf[w.sameInoAs], w.sameInoAs)
			}
			continue
		}
		if r.ino != next {
			t.Errorf("%s: inode %d, want %d (sequential)", r.name, r.ino, next)
		}
		if prev, dup := seen[r.ino]; dup {
			t.Errorf("%s shares inode %d with %s", r.name, r.ino, prev)
		}
		seen[r.ino] = r.name
		next++
	}
}

func TestReproducible(t *testing.T) {
	files := sampleFiles()
	var first []byte
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 5 {
		// Same files in any order, with names spelled differently.
		shuffled := append([]File(nil), files...)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if i%2 == 1 {
			for k := range shuffled {
				shuffled[k].Name = "/" + shuffled[k].Name
			}
		}
		var buf bytes.Buffer
		if err := WriteFiles(&buf, epoch, shuffled); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = buf.Bytes()
			continue
		}
		if !bytes.Equal(first, buf.Bytes()) {
			t.Fatalf("run %d: archive differs (sha256 %x vs %x)", i, sha256.Sum256(first), sha256.Sum256(buf.Bytes()))
		}
	}
	var other bytes.Buffer
	if err := WriteFiles(&other, epoch+1, files); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, other.Bytes()) {
		t.Error("a different mtime gave the same archive")
	}
}

func TestWriterErrors(t *testing.T) {
	reg := func(name string, size int64) Entry { return Entry{Name: name, Mode: TypeRegular | 0o644, Size: size} }
	cases := []struct {
		name    string
		entries []Entry
		bodies  []string
		want    string
	}{
		{"climbs out", []Entry{reg("../etc/passwd", 0)}, nil, "leads out"},
		{"not clean", []Entry{reg("a//b", 0)}, nil, "not clean"},
		{"trailer name", []Entry{reg("TRAILER!!!", 0)}, nil, "reserved"},
		{"twice", []Entry{reg("a", 0), reg("a", 0)}, nil, "twice"},
		{"short body", []Entry{reg("a", 10)}, []string{"abc"}, "contents are 3 bytes, header says 10"},
		{"no body", []Entry{reg("a", 10)}, nil, "no contents"},
		{"link to nothing", []Entry{{Name: "b", HardLink: "a"}}, nil, "not an earlier regular file"},
		{"too many links", []Entry{reg("a", 0), {Name: "b", HardLink: "a"}}, nil, "NLink 1"},
		{"symlink without target", []Entry{{Name: "l", Mode: TypeSymlink | 0o777}}, nil, "without a target"},
		{"size on a dir", []Entry{{Name: "d", Mode: TypeDir | 0o755, Size: 3}}, nil, "not regular"},
		{"no type", []Entry{{Name: "x", Mode: 0o644}}, nil, "no file type"},
		{"devnums on a file", []Entry{{Name: "x", Mode: TypeRegular | 0o644, DevMajor: 1}}, nil, "not a device"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWriter(io.Discard, epoch)
			var err error
			for i, e := range c.entries {
				var body io.Reader
				if i < len(c.bodies) {
					body = strings.NewReader(c.bodies[i])
				}
				if err = w.WriteEntry(e, body); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if err := NewWriter(io.Discard, -1).WriteEntry(reg("a", 0), nil); err == nil {
		t.Error("negative mtime accepted")
	}
	if err := NewWriter(io.Discard, 1<<32).Close(); err == nil {
		t.Error("mtime past 2106 accepted")
	}

	for _, c := range []struct {
		name  string
		files []File
		want  string
	}{
		{"duplicate", []File{{Entry: reg("a", 0)}, {Entry: reg("/a", 0)}}, "listed twice"},
		{"parent is a file", []File{{Entry: reg("a", 0)}, {Entry: reg("a/b", 0)}}, "not a directory"},
		{"link to a dir", []File{{Entry: Entry{Name: "d", Mode: TypeDir | 0o755}}, {Entry: Entry{Name: "l", HardLink: "d"}}}, "not a regular file"},
	} {
		if err := WriteFiles(io.Discard, epoch, c.files); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestEmptyArchive(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFiles(&buf, 0, nil); err != nil {
		t.Fatal(err)
	}
	if recs := parse(t, buf.Bytes()); len(recs) != 0 {
		t.Errorf("empty archive has entries %+v", recs)
	}
	// Header (110) + "TRAILER!!!\0" (11) = 121, padded to 124.
	if buf.Len() != 124 {
		t.Errorf("empty archive is %d bytes, want 124", buf.Len())
	}
}

// GNU cpio reads the archives: its listing must show what was written, and
// extraction must give back the files, links and modes.

func needCpio(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("SKIPPING GNU CPIO CROSS-CHECK: cpio is not on PATH; install the Debian package cpio to run it")
	}
	return p
}

func TestGNUCpioListing(t *testing.T) {
	tool := needCpio(t)
	var buf bytes.Buffer
	if err := WriteFiles(&buf, epoch, sampleFiles()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "-t", "-v", "-n", "--quiet")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	cmd.Env = append(os.Environ(), "TZ=UTC", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -t: %v\n%s", err, out)
	}
	// mode nlink uid gid size-or-dev date name [-> target]
	want := []string{
		"drwxr-xr-x 2 0 0 0 bin",
		"-rwxr-xr-x 1 0 0 5 bin/busybox",
		"lrwxrwxrwx 1 0 0 7 bin/sh -> busybox",
		"drwxr-xr-x 2 0 0 0 dev",
		"crw------- 1 0 0 5,1 dev/console",
		"prw------- 1 0 0 0 dev/initctl",
		"brw-rw---- 1 0 6 254,0 dev/vda",
		"drwxr-xr-x 2 0 0 0 home",
		"drwx------ 2 1000 1000 0 home/agent",
		"-rw-r--r-- 1 1000 1000 0 home/agent/.profile",
		"-rwxr-xr-x 1 0 0 11 init",
		"drwxr-xr-x 2 0 0 0 sbin",
		"-rw-r----- 3 0 42 7 sbin/aa",
		"drwxrwxrwt 2 0 0 0 tmp",
		"drwxr-xr-x 2 0 0 0 usr",
		"drwxr-xr-x 2 0 0 0 usr/bin",
		"-rwsr-xr-x 1 0 0 3 usr/bin/su",
		"-rw-r----- 3 0 42 0 usr/bin/yy",
		"-rw-r----- 3 0 42 0 usr/bin/zz",
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("cpio listed %d entries, want %d:\n%s", len(lines), len(want), out)
	}
	date := time.Unix(epoch, 0).UTC().Format("Jan _2  2006")
	for i, line := range lines {
		f := strings.Fields(line)
		// Device numbers print as "5," "1"; join them.
		if strings.HasSuffix(f[4], ",") {
			f = append(f[:4], append([]string{f[4] + f[5]}, f[6:]...)...)
		}
		if len(f) < 9 {
			t.Fatalf("cannot read cpio line %q", line)
		}
		if got := strings.Join(f[5:8], " "); got != strings.Join(strings.Fields(date), " ") {
			t.Errorf("%s: date %q, want %q", f[8], got, date)
		}
		got := strings.Join(append(f[:5], f[8:]...), " ")
		if got != want[i] {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
}

func TestGNUCpioExtract(t *testing.T) {
	tool := needCpio(t)
	var files []File
	for _, f := range sampleFiles() {
		if typ := f.Mode & TypeMask; typ == TypeChar || typ == TypeBlock || f.Mode&0o4000 != 0 {
			continue // needs privileges the test should not assume
		}
		files = append(files, f)
	}
	var buf bytes.Buffer
	if err := WriteFiles(&buf, epoch, files); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(tool, "-i", "-d", "-m", "--no-absolute-filenames", "--quiet", "-D", dir)
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, want := range map[string]string{
		"init": "#!/bin/sh\n\n", "bin/busybox": "ELF!!", "sbin/aa": "linked\n", "usr/bin/yy": "linked\n", "usr/bin/zz": "linked\n",
	} {
		if got := read(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v", target, err)
	}
	aa, err1 := os.Stat(filepath.Join(dir, "sbin/aa"))
	zz, err2 := os.Stat(filepath.Join(dir, "usr/bin/zz"))
	if err1 != nil || err2 != nil || !os.SameFile(aa, zz) {
		t.Errorf("sbin/aa and usr/bin/zz are not one file: %v %v", err1, err2)
	}
	if st, ok := aa.Sys().(*syscall.Stat_t); ok && st.Nlink != 3 {
		t.Errorf("sbin/aa has %d links, want 3", st.Nlink)
	}
	for name, want := range map[string]os.FileMode{
		"init": 0o755, "sbin/aa": 0o640, "home/agent": os.ModeDir | 0o700, "tmp": os.ModeDir | os.ModeSticky | 0o777,
		"dev/initctl": os.ModeNamedPipe | 0o600,
	} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
		if name == "init" && !fi.ModTime().Equal(time.Unix(epoch, 0)) {
			t.Errorf("init: mtime %v, want %v", fi.ModTime(), time.Unix(epoch, 0))
		}
	}
}
