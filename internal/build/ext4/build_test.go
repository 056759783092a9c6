package ext4

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// acl is a POSIX ACL in the xattr form tar carries: owner rw, user 1000
// r, group r, mask r, other none.
func acl() []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 2)
	for _, e := range [][3]uint32{{0x01, 6, 0xffffffff}, {0x02, 4, 1000}, {0x04, 4, 0xffffffff}, {0x10, 4, 0xffffffff}, {0x20, 0, 0xffffffff}} {
		b = le.AppendUint16(b, uint16(e[0]))
		b = le.AppendUint16(b, uint16(e[1]))
		b = le.AppendUint32(b, e[2])
	}
	return b
}

// sameACLIDs zeroes the ids of ACL entries that carry none (owner,
// group, mask, other): the kernel reports them as -1, debugfs as 0.
func sameACLIDs(v []byte) []byte {
	v = bytes.Clone(v)
	for e := v[min(4, len(v)):]; len(e) >= 8; e = e[8:] {
		if tag := binary.LittleEndian.Uint16(e); tag != 0x02 && tag != 0x08 {
			clear(e[4:8])
		}
	}
	return v
}

var capability = string([]byte{0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // cap_net_bind_service

// everything is a tree with every kind of entry Build supports.
func everything() []entry {
	nanos := time.Unix(testEpoch-7200, 123456789)
	future := time.Unix(testEpoch+86400, 0)
	return []entry{
		dir("./", 0o755),
		dir("etc/", 0o755),
		file("etc/passwd", 0o644, []byte("root:x:0:0::/root:/bin/sh\n")),
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/su", Mode: 0o4755}, body: randomBytes(1, 10000)},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/wall", Mode: 0o2755, Gid: 5}, body: randomBytes(2, 4096)},
		dir("tmp/", 0o1777),
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "home/agent/", Mode: 0o700, Uid: 501, Gid: 501}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "home/agent/big.bin", Mode: 0o600, Uid: 501, Gid: 501, ModTime: nanos}, body: randomBytes(3, 3*4096+17)},
		file("home/agent/empty", 0o644, nil),
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "home/agent/far-ids", Mode: 0o640, Uid: 100000, Gid: 200000}, body: []byte("x")},
		file("bin/busybox", 0o755, randomBytes(4, 70000)),
		{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "/bin/busybox", Mode: 0o777}},
		{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/long", Linkname: strings.Repeat("a/", 50) + "target", Mode: 0o777}},
		{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "bin/ls", Linkname: "bin/busybox"}},
		{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "usr/bin/ls", Linkname: "./bin/busybox"}},
		dir("dev/", 0o755),
		{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}},
		{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "dev/sda", Mode: 0o660, Gid: 6, Devmajor: 8, Devminor: 0}},
		{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/big", Mode: 0o600, Devmajor: 300, Devminor: 70000}},
		{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "run/fifo", Mode: 0o644}},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "future", Mode: 0o644, ModTime: future}, body: []byte("later\n")},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "xattr/small", Mode: 0o755, PAXRecords: map[string]string{
			"SCHILY.xattr.user.note":           "hi",
			"SCHILY.xattr.security.capability": capability,
		}}, body: []byte("#!/bin/sh\n")},
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "xattr/large", Mode: 0o644, PAXRecords: map[string]string{
			"SCHILY.xattr.user.big":     strings.Repeat("0123456789", 200),
			"SCHILY.xattr.trusted.more": "value",
		}}, body: []byte("data")},
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "xattr/acl/", Mode: 0o740, PAXRecords: map[string]string{
			"SCHILY.xattr.system.posix_acl_access":  string(acl()),
			"SCHILY.xattr.system.posix_acl_default": string(acl()),
		}}},
	}
}

func testOptions() Options {
	return Options{Size: 64 << 20, Label: "gondolin-root", Seed: []byte("test image"), Epoch: testEpoch}
}

// want is what an entry should look like in the image.
type want struct {
	typ          string
	mode         int64
	uid, gid     int64
	links        int64
	size         int64
	major, minor int64
	target       string
	body         []byte
	mtime        time.Time
}

// expected derives what each path in the tree should look like from the
// tree itself.
func expected(entries []entry) map[string]*want {
	w := map[string]*want{}
	types := map[byte]string{tar.TypeDir: "directory", tar.TypeReg: "regular", tar.TypeSymlink: "symlink",
		tar.TypeChar: "character special", tar.TypeBlock: "block special", tar.TypeFifo: "FIFO"}
	for _, e := range entries {
		p := "/" + strings.Trim(strings.TrimPrefix(e.hdr.Name, "./"), "/")
		if e.hdr.Typeflag == tar.TypeLink {
			target := w["/"+strings.TrimPrefix(e.hdr.Linkname, "./")]
			target.links++
			w[p] = target
			continue
		}
		mt := e.hdr.ModTime
		if mt.IsZero() {
			mt = time.Unix(testEpoch-3600, 0)
		}
		if mt.Unix() > testEpoch {
			mt = time.Unix(testEpoch, 0)
		}
		x := &want{typ: types[e.hdr.Typeflag], mode: e.hdr.Mode, uid: int64(e.hdr.Uid), gid: int64(e.hdr.Gid),
			links: 1, body: e.body, size: int64(len(e.body)), target: e.hdr.Linkname,
			major: e.hdr.Devmajor, minor: e.hdr.Devminor, mtime: mt}
		if x.typ == "symlink" {
			x.size = int64(len(x.target))
		}
		w[p] = x
	}
	return w
}

func TestEveryFileType(t *testing.T) {
	entries := everything()
	img, st := buildFile(t, makeTar(t, entries), testOptions())
	fsck(t, img)

	if st.Files != 10 || st.Symlinks != 2 || st.HardLinks != 2 || st.Devices != 3 || st.FIFOs != 1 || st.XattrBlocks != 1 {
		t.Errorf("stats = %+v", st)
	}
	for p, w := range expected(entries) {
		s := statInode(t, img, p)
		if s.typ != w.typ {
			t.Errorf("%s: type %s, want %s", p, s.typ, w.typ)
			continue
		}
		if s.mode != w.mode || s.uid != w.uid || s.gid != w.gid {
			t.Errorf("%s: mode %o uid %d gid %d, want %o %d %d", p, s.mode, s.uid, s.gid, w.mode, w.uid, w.gid)
		}
		if p != "/" && s.typ != "directory" && s.links != w.links {
			t.Errorf("%s: %d links, want %d", p, s.links, w.links)
		}
		if sec, extra := s.mtime, s.mtimeExtra; sec != w.mtime.Unix() || extra != int64(w.mtime.Nanosecond())<<2 {
			t.Errorf("%s: mtime %#x:%#x, want %v", p, sec, extra, w.mtime)
		}
		switch w.typ {
		case "regular":
			if s.size != w.size {
				t.Errorf("%s: size %d, want %d", p, s.size, w.size)
			}
			if got := catFile(t, img, p); !bytes.Equal(got, w.body) {
				t.Errorf("%s: content differs (%d bytes, want %d)", p, len(got), len(w.body))
			}
		case "symlink":
			got := s.fastLink
			if len(w.target) >= 60 {
				if got != "" {
					t.Errorf("%s: a %d-byte target stored as a fast link", p, len(w.target))
				}
				got = string(catFile(t, img, p))
			}
			if got != w.target || s.size != w.size {
				t.Errorf("%s: target %q (size %d), want %q", p, got, s.size, w.target)
			}
		case "character special", "block special":
			if s.major != w.major || s.minor != w.minor {
				t.Errorf("%s: device %d:%d, want %d:%d", p, s.major, s.minor, w.major, w.minor)
			}
		}
	}

	// Directory link counts: 2 + subdirectories.
	for p, n := range map[string]int64{"/": 2 + 9, "/home": 3, "/home/agent": 2, "/usr": 3} {
		if s := statInode(t, img, p); s.links != n {
			t.Errorf("%s: %d links, want %d", p, s.links, n)
		}
	}

	// Extended attributes: in the inode, in a block, and ACLs read back
	// in the form tar carries them.
	if s := statInode(t, img, "/xattr/large"); s.fileACL == 0 {
		t.Errorf("/xattr/large: no attribute block")
	}
	if s := statInode(t, img, "/xattr/small"); s.fileACL != 0 {
		t.Errorf("/xattr/small: attributes in block %d, want in the inode", s.fileACL)
	}
	for _, c := range []struct{ path, name, value string }{
		{"/xattr/small", "user.note", "hi"},
		{"/xattr/small", "security.capability", capability},
		{"/xattr/large", "user.big", strings.Repeat("0123456789", 200)},
		{"/xattr/large", "trusted.more", "value"},
		{"/xattr/acl", "system.posix_acl_access", string(acl())},
		{"/xattr/acl", "system.posix_acl_default", string(acl())},
	} {
		out := filepath.Join(t.TempDir(), "value")
		debugfs(t, img, fmt.Sprintf("ea_get -f %s %s %s", out, c.path, c.name), false)
		got, err := os.ReadFile(out)
		if strings.HasPrefix(c.name, "system.posix_acl") {
			got, c.value = sameACLIDs(got), string(sameACLIDs([]byte(c.value)))
		}
		if err != nil || string(got) != c.value {
			t.Errorf("%s %s = %q (%v), want %q", c.path, c.name, got, err, c.value)
		}
	}

	// The superblock carries the label, the seed's UUID and the epoch.
	sb := dumpe2fs(t, img)
	uuid := st.UUID
	for _, line := range []string{
		"Filesystem volume name:   gondolin-root",
		fmt.Sprintf("Filesystem UUID:          %x-%x-%x-%x-%x", uuid[0:4], uuid[4:6], uuid[6:8], uuid[8:10], uuid[10:]),
		"Filesystem created:       " + time.Unix(testEpoch, 0).UTC().Format("Mon Jan _2 15:04:05 2006"),
		fmt.Sprintf("Free blocks:              %d", st.FreeBlocks),
		fmt.Sprintf("Free inodes:              %d", st.FreeInodes),
	} {
		if !strings.Contains(sb, line+"\n") {
			t.Errorf("dumpe2fs lacks %q", line)
		}
	}
}

func dumpe2fs(t testing.TB, img string) string {
	t.Helper()
	cmd := exec.Command(tool(t, "dumpe2fs"), "-h", img)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dumpe2fs: %v", err)
	}
	return string(out)
}

func sha(t testing.TB, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// memImage is an io.WriterAt with no Truncate method.
type memImage struct{ b []byte }

func (m *memImage) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

func TestReproducible(t *testing.T) {
	tarball := makeTar(t, everything())
	opts := testOptions()
	opts.JournalBlocks = 1024
	a, _ := buildFile(t, tarball, opts)
	b, _ := buildFile(t, tarball, opts)
	if sha(t, a) != sha(t, b) {
		t.Fatal("two builds of the same tree differ")
	}

	// A target without Truncate gets the same bytes.
	var m memImage
	if _, err := Build(context.Background(), &m, bytes.NewReader(tarball), opts); err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(m.b) != sha(t, a) {
		t.Error("building into memory differs from building into a file")
	}

	// Every input that affects the bytes changes them.
	changed := everything()
	changed[2].hdr.Mode = 0o600 // etc/passwd
	c, _ := buildFile(t, makeTar(t, changed), opts)
	if sha(t, c) == sha(t, a) {
		t.Error("changing one file's mode left the image unchanged")
	}
	changed = everything()
	changed[9].hdr.Uid = 100001 // home/agent/far-ids
	c, _ = buildFile(t, makeTar(t, changed), opts)
	if sha(t, c) == sha(t, a) {
		t.Error("changing one file's owner left the image unchanged")
	}
	seeded := opts
	seeded.Seed = []byte("another image")
	c, _ = buildFile(t, tarball, seeded)
	if sha(t, c) == sha(t, a) {
		t.Error("changing the seed left the image unchanged")
	}
	later := opts
	later.Epoch++
	c, _ = buildFile(t, tarball, later)
	if sha(t, c) == sha(t, a) {
		t.Error("changing the epoch left the image unchanged")
	}
}

func TestTooSmall(t *testing.T) {
	tarball := makeTar(t, []entry{file("a", 0o644, randomBytes(5, 3<<20)), file("b", 0o644, randomBytes(6, 3<<20))})
	opts := testOptions()
	opts.Size = 4 << 20
	img := filepath.Join(t.TempDir(), "small.ext4")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Build(context.Background(), f, bytes.NewReader(tarball), opts)
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("Build into %d bytes: %v, want a *FitError", opts.Size, err)
	}
	if fe.Size != opts.Size || fe.MinSize <= 6<<20 || fe.Reason != "blocks" {
		t.Errorf("FitError = %+v", fe)
	}
	msg := err.Error()
	for _, s := range []string{fmt.Sprint(opts.Size), fmt.Sprint(fe.MinSize), "does not fit"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}

	// The size the error names is enough, and one block less is not.
	opts.Size = fe.MinSize
	img, _ = buildFile(t, tarball, opts)
	fsck(t, img)
	opts.Size = fe.MinSize - blockSize
	if _, err := Build(context.Background(), &memImage{}, bytes.NewReader(tarball), opts); !errors.As(err, &fe) {
		t.Errorf("Build one block below the minimum: %v, want a *FitError", err)
	}
}

func TestTooManyFiles(t *testing.T) {
	var entries []entry
	for i := range 3000 {
		entries = append(entries, file(fmt.Sprintf("d/f%04d", i), 0o644, nil))
	}
	tarball := makeTar(t, entries)
	opts := testOptions()
	opts.Size, opts.InodeRatio = 16<<20, 16384 // 1024 inodes
	_, err := Build(context.Background(), &memImage{}, bytes.NewReader(tarball), opts)
	var fe *FitError
	if !errors.As(err, &fe) || fe.Reason != "inodes" || fe.Inodes < 3000 {
		t.Fatalf("Build: %v, want a *FitError about inodes", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(fe.Inodes)) {
		t.Errorf("error %q does not name the inode count", err)
	}
	opts.Size = fe.MinSize
	img, st := buildFile(t, tarball, opts)
	fsck(t, img)
	if st.Inodes-st.FreeInodes != uint32(fe.Inodes) {
		t.Errorf("%d inodes used, the error said %d are needed", st.Inodes-st.FreeInodes, fe.Inodes)
	}
}

func TestLargeDirectory(t *testing.T) {
	const n = 10000
	entries := []entry{dir("many/", 0o755)}
	for i := range n {
		entries = append(entries, file(fmt.Sprintf("many/file-%05d.txt", i), 0o644, []byte(fmt.Sprint(i))))
	}
	opts := testOptions()
	opts.Size = 256 << 20
	start := time.Now()
	img, _ := buildFile(t, makeTar(t, entries), opts)
	t.Logf("%d files in one directory: %v", n, time.Since(start))
	fsck(t, img)
	out := debugfs(t, img, "ls /many", false)
	if got := strings.Count(out, "file-"); got != n {
		t.Errorf("ls /many lists %d files, want %d", got, n)
	}
	if got := catFile(t, img, "/many/file-09999.txt"); string(got) != "9999" {
		t.Errorf("file-09999.txt = %q", got)
	}
}

// TestLargeFile writes a file spread over more block groups than the
// inode holds extents for, so that it needs an extent tree block.
func TestLargeFile(t *testing.T) {
	size := int64(5*blocksPerGroup*blockSize + 12345)
	pr, pw := io.Pipe()
	sum := make(chan []byte, 1)
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: size, ModTime: time.Unix(testEpoch, 0)})
		chunk := make([]byte, 1<<20)
		h := sha256.New()
		for left := size; err == nil && left > 0; left -= int64(len(chunk)) {
			c := chunk[:min(int64(len(chunk)), left)]
			binary.LittleEndian.PutUint64(c, uint64(left)) // every chunk differs
			h.Write(c)
			_, err = tw.Write(c)
		}
		if err == nil {
			err = tw.Close()
		}
		sum <- h.Sum(nil)
		pw.CloseWithError(err)
	}()
	opts := testOptions()
	opts.Size = 1 << 30
	img := filepath.Join(t.TempDir(), "big.ext4")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Build(context.Background(), f, pr, opts); err != nil {
		t.Fatal(err)
	}
	fsck(t, img)
	s := statInode(t, img, "/big")
	if s.size != size || !strings.Contains(s.text, "(ETB0)") {
		t.Errorf("/big: size %d, want %d, and an extent tree block:\n%s", s.size, size, s.text)
	}
	// Read back the content through the extent tree.
	dump := filepath.Join(t.TempDir(), "big")
	debugfs(t, img, "dump /big "+dump, false)
	df, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	h := sha256.New()
	if _, err := io.Copy(h, df); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Sum(nil), <-sum) {
		t.Error("/big reads back different")
	}
}

// TestWritable proves the image has free space a writer can use: debugfs
// writes a file and a directory into it and e2fsck stays clean.
func TestWritable(t *testing.T) {
	img, st := buildFile(t, makeTar(t, everything()), testOptions())
	if st.FreeBlocks < st.Blocks/2 || st.FreeInodes == 0 {
		t.Fatalf("64 MiB image of a small tree: %d of %d blocks and %d inodes free", st.FreeBlocks, st.Blocks, st.FreeInodes)
	}
	src := filepath.Join(t.TempDir(), "payload")
	payload := randomBytes(7, 5<<20)
	if err := os.WriteFile(src, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	debugfs(t, img, "write "+src+" /etc/payload", true)
	debugfs(t, img, "mkdir /etc/new", true)
	fsck(t, img)
	if got := catFile(t, img, "/etc/payload"); !bytes.Equal(got, payload) {
		t.Error("payload written by debugfs reads back different")
	}
	sb := dumpe2fs(t, img)
	if want := fmt.Sprintf("Free blocks:              %d\n", st.FreeBlocks-5<<20/blockSize-1); !strings.Contains(sb, want) {
		t.Errorf("after writing 5 MiB and a directory, dumpe2fs lacks %q", want)
	}
}

func TestJournal(t *testing.T) {
	opts := testOptions()
	opts.JournalBlocks = 4096
	img, st := buildFile(t, makeTar(t, everything()), opts)
	out := fsck(t, img)
	sb := dumpe2fs(t, img)
	for _, s := range []string{"has_journal", "Journal inode:            8", "Total journal blocks:     4096", "Journal start:            0"} {
		if !strings.Contains(sb, s) {
			t.Errorf("dumpe2fs lacks %q", s)
		}
	}
	if st.Blocks-st.FreeBlocks < 4096 {
		t.Errorf("%d blocks used, fewer than the journal", st.Blocks-st.FreeBlocks)
	}
	if !strings.Contains(out, "clean") && !strings.Contains(out, "Pass 5") {
		t.Errorf("e2fsck output: %s", out)
	}
}

func TestTimesOutsideInt32(t *testing.T) {
	opts := testOptions()
	opts.Epoch = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	times := map[string]time.Time{
		"/past":   time.Date(1960, 3, 4, 5, 6, 7, 0, time.UTC),
		"/future": time.Date(2106, 2, 7, 6, 28, 17, 0, time.UTC),
		"/later":  time.Date(2199, 12, 31, 23, 59, 59, 999, time.UTC),
		"/capped": time.Date(2200, 1, 1, 0, 0, 0, 1, time.UTC),
	}
	var entries []entry
	for p, mt := range times {
		entries = append(entries, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p[1:], Mode: 0o644, ModTime: mt}})
	}
	img, _ := buildFile(t, makeTar(t, entries), opts)
	fsck(t, img)
	times["/capped"] = time.Unix(opts.Epoch, 0).UTC()
	for p, mt := range times {
		s := statInode(t, img, p)
		m := reStatMtimeText.FindStringSubmatch(s.text)
		if m == nil || m[1] != mt.Format("Mon Jan _2 15:04:05 2006") || s.mtimeExtra>>2 != int64(mt.Nanosecond()) {
			t.Errorf("%s: mtime %q (+%dns), want %v", p, m, s.mtimeExtra>>2, mt)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	ok := file("a", 0o644, []byte("a"))
	for _, c := range []struct {
		name    string
		entries []entry
		opts    func(*Options)
		want    string
	}{
		{"size not a block multiple", []entry{ok}, func(o *Options) { o.Size = 1<<20 + 1 }, "multiple of 4096"},
		{"size zero", []entry{ok}, func(o *Options) { o.Size = 0 }, "multiple of 4096"},
		{"label too long", []entry{ok}, func(o *Options) { o.Label = "a-label-of-17-chr" }, "longer than 16 bytes"},
		{"inode ratio", []entry{ok}, func(o *Options) { o.InodeRatio = 512 }, "inode ratio"},
		{"small journal", []entry{ok}, func(o *Options) { o.JournalBlocks = 100 }, "1024 blocks"},
		{"dot dot", []entry{file("a/../../etc/passwd", 0o644, nil)}, nil, `".." element`},
		{"listed twice", []entry{ok, ok}, nil, "/a is listed more than once"},
		{"file under file", []entry{ok, file("a/b", 0o644, nil)}, nil, "parent /a is not a directory"},
		{"dangling hard link", []entry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "nowhere"}}}, nil, "/nowhere is not in the stream"},
		{"hard link to directory", []entry{dir("d/", 0o755), {hdr: tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "d"}}}, nil, "/d is a directory"},
		{"empty symlink", []entry{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "l"}}}, nil, "empty target"},
		{"long symlink", []entry{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: strings.Repeat("x", 4096)}}}, nil, "longer than 4095"},
		{"long name", []entry{file(strings.Repeat("n", 256), 0o644, nil)}, nil, "longer than 255 bytes"},
		{"unknown xattr namespace", []entry{{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "x", PAXRecords: map[string]string{"SCHILY.xattr.os2.name": "v"}}}}, nil, "namespace not supported"},
		{"xattrs over a block", []entry{{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "x", PAXRecords: map[string]string{"SCHILY.xattr.user.a": strings.Repeat("v", 4000), "SCHILY.xattr.user.b": strings.Repeat("v", 200)}}}}, nil, "more than one 4096-byte block"},
		{"device out of range", []entry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "c", Devmajor: 5000}}}, nil, "out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := testOptions()
			opts.Size = 8 << 20
			if c.opts != nil {
				c.opts(&opts)
			}
			_, err := Build(context.Background(), &memImage{}, bytes.NewReader(makeTar(t, c.entries)), opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Build: %v, want an error with %q", err, c.want)
			}
		})
	}

	// A stream cut short in the middle of a file.
	tarball := makeTar(t, []entry{file("a", 0o644, randomBytes(8, 100000))})
	_, err := Build(context.Background(), &memImage{}, bytes.NewReader(tarball[:50000]), testOptions())
	if err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("Build of a truncated stream: %v, want an error naming the entry", err)
	}
}
