package ext4

import (
	"archive/tar"
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testEpoch is the build time the tests use.
const testEpoch = 1700000000

// entry is one tar entry of a test tree.
type entry struct {
	hdr  tar.Header
	body []byte
}

func makeTar(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.Format = tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(testEpoch-3600, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("tar header %s: %v", h.Name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatalf("tar body %s: %v", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dir(name string, mode int64) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

func file(name string, mode int64, body []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body: body}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// buildFile builds an image from a tar stream into a new file.
func buildFile(t testing.TB, tarball []byte, opts Options) (string, Stats) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "root.ext4")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := Build(context.Background(), f, bytes.NewReader(tarball), opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return img, st
}

// tool finds an e2fsprogs program; they live in /usr/sbin, which a
// non-root PATH may lack.
func tool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	t.Skipf("%s (e2fsprogs) is not installed", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// fsck runs e2fsck -fn and fails the test unless the image is clean.
func fsck(t testing.TB, img string) string {
	t.Helper()
	out, err := exec.Command(tool(t, "e2fsck"), "-fn", img).CombinedOutput()
	if err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", img, err, out)
	}
	return string(out)
}

// debugfs runs one debugfs request against the image.
func debugfs(t testing.TB, img string, request string, write bool) string {
	t.Helper()
	args := []string{"-R", request, img}
	if write {
		args = append([]string{"-w"}, args...)
	}
	cmd := exec.Command(tool(t, "debugfs"), args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("debugfs %s: %v\n%s", request, err, stderr.String())
	}
	// debugfs prints its version, then any request error, on stderr and
	// exits 0 either way.
	if _, rest, _ := strings.Cut(stderr.String(), "\n"); strings.TrimSpace(rest) != "" {
		t.Fatalf("debugfs %s: %s", request, rest)
	}
	return stdout.String()
}

// inodeStat is what debugfs's stat prints about an inode.
type inodeStat struct {
	typ          string
	mode         int64 // permission and special bits
	uid, gid     int64
	size         int64
	links        int64
	flags        int64
	fileACL      int64
	mtime        int64 // seconds as stored
	mtimeExtra   int64
	major, minor int64
	fastLink     string
	text         string
}

var (
	reStatType      = regexp.MustCompile(`Type: (.+?)\s+Mode:\s+(\d+)\s+Flags: 0x([0-9a-f]+)`)
	reStatOwner     = regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+).*Size: (\d+)`)
	reStatLinks     = regexp.MustCompile(`Links: (\d+)`)
	reStatACL       = regexp.MustCompile(`File ACL: (\d+)`)
	reStatMtime     = regexp.MustCompile(`mtime: 0x([0-9a-f]+):([0-9a-f]+)`)
	reStatMtimeText = regexp.MustCompile(`mtime: 0x[0-9a-f]+:[0-9a-f]+ -- (.*)`)
	reStatDev       = regexp.MustCompile(`Device major/minor number: (\d+):(\d+)`)
	reStatFast      = regexp.MustCompile(`Fast link dest: "(.*)"`)
)

func statInode(t testing.TB, img, p string) inodeStat {
	t.Helper()
	out := debugfs(t, img, "stat "+p, false)
	var s inodeStat
	s.text = out
	m := reStatType.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("debugfs stat %s: no type line in\n%s", p, out)
	}
	s.typ = m[1]
	s.mode, _ = strconv.ParseInt(m[2], 8, 64)
	s.flags, _ = strconv.ParseInt(m[3], 16, 64)
	if m := reStatOwner.FindStringSubmatch(out); m != nil {
		s.uid, _ = strconv.ParseInt(m[1], 10, 64)
		s.gid, _ = strconv.ParseInt(m[2], 10, 64)
		s.size, _ = strconv.ParseInt(m[3], 10, 64)
	}
	if m := reStatLinks.FindStringSubmatch(out); m != nil {
		s.links, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reStatACL.FindStringSubmatch(out); m != nil {
		s.fileACL, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reStatMtime.FindStringSubmatch(out); m != nil {
		s.mtime, _ = strconv.ParseInt(m[1], 16, 64)
		s.mtimeExtra, _ = strconv.ParseInt(m[2], 16, 64)
	}
	if m := reStatDev.FindStringSubmatch(out); m != nil {
		s.major, _ = strconv.ParseInt(m[1], 10, 64)
		s.minor, _ = strconv.ParseInt(m[2], 10, 64)
	}
	if m := reStatFast.FindStringSubmatch(out); m != nil {
		s.fastLink = m[1]
	}
	return s
}

// catFile reads a file's bytes out of the image with debugfs.
func catFile(t testing.TB, img, p string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dump")
	debugfs(t, img, "dump "+p+" "+out, false)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("dump %s: %v", p, err)
	}
	return b
}
