package qcow2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// piece is data placed into a raw image at an offset.
type piece struct {
	off  int64
	data []byte
}

// rawCase describes a raw disk image made of pieces over zeros.
type rawCase struct {
	name        string
	size        int64
	pieces      []piece
	clusterBits int
	wantAlloc   int64 // allocated guest clusters, -1 to skip the check
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	b = b[:n]
	for i, c := range b {
		if c == 0 {
			b[i] = 1 // never zero: each byte makes its cluster non-zero
		}
	}
	return b
}

func rawCases() []rawCase {
	r := rand.New(rand.NewPCG(1, 2))
	const cs = 64 << 10
	var random []piece
	for range 40 {
		off := r.Int64N(48<<20 - 200<<10)
		random = append(random, piece{off, randBytes(r, 1+r.IntN(200<<10))})
	}
	return []rawCase{
		{name: "empty", size: 0, wantAlloc: 0},
		{name: "all-zero", size: 10 << 20, wantAlloc: 0},
		{name: "one-cluster", size: cs, pieces: []piece{{0, randBytes(r, cs)}}, wantAlloc: 1},
		{name: "one-byte-in-last-cluster", size: 3 * cs, pieces: []piece{{3*cs - 1, []byte{7}}}, wantAlloc: 1},
		{name: "size-not-cluster-multiple", size: 5*cs + 4096, pieces: []piece{{5*cs + 100, randBytes(r, 3996)}, {10, []byte{1}}}, wantAlloc: 2},
		{name: "size-not-sector-multiple", size: 1000, pieces: []piece{{999, []byte{9}}}, wantAlloc: 1},
		{name: "random-sparse", size: 48 << 20, pieces: random, wantAlloc: -1},
		{name: "random-sparse-512-byte-clusters", size: 48 << 20, pieces: random, clusterBits: 9, wantAlloc: -1},
		{
			// More than one L2 table: 8192 entries of 64 KiB map 512 MiB each.
			name: "three-l2-tables", size: 1<<30 + 512<<20 + 12345,
			pieces: []piece{
				{0, randBytes(r, 100)},
				{512<<20 - 10, randBytes(r, 20)},       // straddles the first two L2 tables
				{1<<30 + 7, randBytes(r, 2*cs)},        // third table
				{1<<30 + 512<<20, randBytes(r, 12345)}, // last partial cluster
			},
			wantAlloc: 7,
		},
	}
}

// writeRaw makes the raw image of c as a sparse file.
func writeRaw(t testing.TB, dir string, c rawCase) string {
	t.Helper()
	path := filepath.Join(dir, c.name+".raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(c.size); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.pieces {
		if _, err := f.WriteAt(p.data, p.off); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func sha(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// memWriterAt is an in-memory io.WriterAt.
type memWriterAt struct{ b []byte }

func (m *memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	return copy(m.b[off:], p), nil
}

// onlyReaderAt hides the *os.File so Convert cannot look for holes.
type onlyReaderAt struct{ r io.ReaderAt }

func (o onlyReaderAt) ReadAt(p []byte, off int64) (int, error) { return o.r.ReadAt(p, off) }

func TestConvert(t *testing.T) {
	for _, c := range rawCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rawPath := writeRaw(t, dir, c)
			opts := Options{ClusterBits: c.clusterBits}
			q1 := filepath.Join(dir, "a.qcow2")
			if err := ConvertFile(context.Background(), q1, rawPath, opts); err != nil {
				t.Fatal(err)
			}
			img, err := os.ReadFile(q1)
			if err != nil {
				t.Fatal(err)
			}
			im := parseImage(t, img)
			im.checkRefcounts(t)
			if want := (c.size + 511) / 512 * 512; im.size != want {
				t.Errorf("virtual size %d, want %d", im.size, want)
			}
			if c.wantAlloc >= 0 {
				if got := im.allocated(); got != c.wantAlloc {
					t.Errorf("%d clusters allocated, want %d", got, c.wantAlloc)
				}
			}
			compareWithRaw(t, im, rawPath)

			// Same input, same bytes: from the file again, and from a plain
			// ReaderAt that gives no hole information.
			q2 := filepath.Join(dir, "b.qcow2")
			if err := ConvertFile(context.Background(), q2, rawPath, opts); err != nil {
				t.Fatal(err)
			}
			if sha(t, q1) != sha(t, q2) {
				t.Error("two conversions of the same file differ")
			}
			f, err := os.Open(rawPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var mem memWriterAt
			if err := Convert(context.Background(), &mem, onlyReaderAt{f}, c.size, opts); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mem.b, img) {
				t.Error("conversion without hole information differs from the one with it")
			}

			qemuCheck(t, q1)
			qemuCompare(t, rawPath, "raw", q1)
		})
	}
}

// compareWithRaw reads the whole virtual disk through im and compares it
// with the raw file, zero-padded to the virtual size.
func compareWithRaw(t *testing.T, im *image, rawPath string) {
	t.Helper()
	f, err := os.Open(rawPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const chunk = 4 << 20
	want := make([]byte, chunk)
	got := make([]byte, chunk)
	for off := int64(0); off < im.size; off += chunk {
		n := min(chunk, im.size-off)
		clear(want)
		if _, err := f.ReadAt(want[:n], off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if _, err := im.ReadAt(got[:n], off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:n], want[:n]) {
			for i := range n {
				if got[i] != want[i] {
					t.Fatalf("virtual disk differs from raw at byte %d: %#x, want %#x", off+i, got[i], want[i])
				}
			}
		}
	}
}

func TestConvertErrors(t *testing.T) {
	var mem memWriterAt
	err := Convert(context.Background(), &mem, bytes.NewReader(make([]byte, 1000)), 5000, Options{})
	if err == nil || !strings.Contains(err.Error(), "offset 1000") {
		t.Errorf("short source: got %v, want an error naming offset 1000", err)
	}
	if err := Convert(context.Background(), &mem, bytes.NewReader(nil), 0, Options{ClusterBits: 22}); err == nil {
		t.Error("cluster bits 22 accepted")
	}
	// A file shorter than the size asked for is an error too, not zeros.
	dir := t.TempDir()
	p := filepath.Join(dir, "short.raw")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Convert(context.Background(), &memWriterAt{}, f, 1<<20, Options{}); err == nil {
		t.Error("file shorter than size accepted")
	}
	// A failed conversion leaves nothing at the destination.
	dst := filepath.Join(dir, "out.qcow2")
	if err := ConvertFile(context.Background(), dst, filepath.Join(dir, "missing.raw"), Options{}); err == nil {
		t.Error("missing source accepted")
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("destination exists after a failed conversion: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestCreate(t *testing.T) {
	for _, size := range []int64{0, 1 << 20, 10 << 30, 3<<40 + 512} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "scratch.qcow2")
			if err := Create(p, size); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			im := parseImage(t, raw)
			im.checkRefcounts(t)
			if im.size != size || im.allocated() != 0 || im.backing != "" {
				t.Errorf("size %d, %d allocated, backing %q; want %d, 0, none", im.size, im.allocated(), im.backing, size)
			}
			qemuCheck(t, p)
			if size == 0 {
				return
			}
			// QEMU can allocate in it: write, read back, check again.
			qemuIO(t, p, "", "write -P 0x5a 65536 131072")
			qemuIO(t, p, "", "read -P 0x5a 65536 131072")
			qemuIO(t, p, "", "read -P 0 0 65536")
			qemuCheck(t, p)
		})
	}
}

func TestCreateOverlay(t *testing.T) {
	dir := t.TempDir()
	const size = 4 << 20
	base := bytes.Repeat([]byte{0xab}, size)
	if err := os.WriteFile(filepath.Join(dir, "base.raw"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ConvertFile(context.Background(), filepath.Join(dir, "base.qcow2"), filepath.Join(dir, "base.raw"), Options{}); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"raw", "qcow2"} {
		t.Run(format, func(t *testing.T) {
			over := filepath.Join(dir, "over-"+format+".qcow2")
			// Size 0: taken from the backing image, found relative to the overlay.
			if err := CreateOverlay(over, "base."+format, format, 0); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(over)
			if err != nil {
				t.Fatal(err)
			}
			im := parseImage(t, raw)
			im.checkRefcounts(t)
			if im.backing != "base."+format || im.backingFmt != format || im.size != size {
				t.Errorf("backing %q (%q), size %d; want %q (%q), %d", im.backing, im.backingFmt, im.size, "base."+format, format, size)
			}
			qemuCheck(t, over)
			chain := qemuInfoChain(t, over)
			if len(chain) != 2 || chain[0].Format != "qcow2" || chain[0].BackingFilename != "base."+format ||
				chain[0].BackingFormat != format || chain[1].Format != format || chain[0].VirtualSize != size {
				t.Errorf("backing chain %+v", chain)
			}
			// Reads fall through to the base; writes stay in the overlay.
			qemuIO(t, over, "", "read -P 0xab 0 4M")
			qemuIO(t, over, "", "write -P 0xcd 65536 65536")
			qemuIO(t, over, "", "read -P 0xcd 65536 65536")
			qemuIO(t, over, "", "read -P 0xab 131072 65536")
			qemuCheck(t, over)
		})
	}
	got, err := os.ReadFile(filepath.Join(dir, "base.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, base) {
		t.Error("writing through the overlay changed the base")
	}

	for _, bad := range []struct{ backing, format string }{
		{"base.raw", "vmdk"},
		{"", "raw"},
		{strings.Repeat("x", 1024), "raw"},
	} {
		if err := CreateOverlay(filepath.Join(dir, "bad.qcow2"), bad.backing, bad.format, 1<<20); err == nil {
			t.Errorf("CreateOverlay(%q, %q) accepted", bad.backing, bad.format)
		}
	}
	if err := CreateOverlay(filepath.Join(dir, "bad.qcow2"), "nothere.raw", "raw", 0); err == nil {
		t.Error("missing backing image accepted with size 0")
	}
}

// The checks below run QEMU's own tools on the images when they are
// installed, as an independent reader.

func needQemuImg(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("SKIPPING QEMU CROSS-CHECK: %s is not on PATH; install the Debian package qemu-utils to run it", tool)
	}
	return p
}

func runTool(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func qemuCheck(t *testing.T, path string) {
	t.Helper()
	t.Run("qemu-img-check", func(t *testing.T) {
		out := runTool(t, needQemuImg(t, "qemu-img"), "check", "-f", "qcow2", path)
		if !strings.Contains(out, "No errors were found on the image.") {
			t.Errorf("qemu-img check:\n%s", out)
		}
	})
}

func qemuCompare(t *testing.T, rawPath, rawFormat, qcowPath string) {
	t.Helper()
	t.Run("qemu-img-compare", func(t *testing.T) {
		out := runTool(t, needQemuImg(t, "qemu-img"), "compare", "-f", rawFormat, "-F", "qcow2", rawPath, qcowPath)
		if !strings.Contains(out, "Images are identical.") {
			t.Errorf("qemu-img compare:\n%s", out)
		}
	})
}

func qemuIO(t *testing.T, path, format, cmd string) {
	t.Helper()
	if format == "" {
		format = "qcow2"
	}
	out := runTool(t, needQemuImg(t, "qemu-io"), "-f", format, "-c", cmd, path)
	if strings.Contains(out, "Pattern verification failed") || strings.Contains(out, "failed") {
		t.Fatalf("qemu-io %q:\n%s", cmd, out)
	}
}

type chainEntry struct {
	Filename        string `json:"filename"`
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	BackingFilename string `json:"backing-filename"`
	BackingFormat   string `json:"backing-filename-format"`
}

func qemuInfoChain(t *testing.T, path string) []chainEntry {
	t.Helper()
	out, err := exec.Command(needQemuImg(t, "qemu-img"), "info", "--backing-chain", "--output=json", path).Output()
	if err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	var chain []chainEntry
	if err := json.Unmarshal(out, &chain); err != nil {
		t.Fatalf("qemu-img info output: %v\n%s", err, out)
	}
	return chain
}
