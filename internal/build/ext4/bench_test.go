package ext4

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchEnv makes the test binary build one image and exit, so that the
// benchmark can measure this package's peak memory the same way as
// mke2fs's: as a child process's maximum resident set.
const benchEnv = "EXT4_BENCH_BUILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchEnv); spec != "" {
		if err := benchChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchChild builds "TAR IMAGE SIZE JOURNALBLOCKS".
func benchChild(spec string) error {
	f := strings.Fields(spec)
	if len(f) != 4 {
		return fmt.Errorf("%s=%q: want TAR IMAGE SIZE JOURNALBLOCKS", benchEnv, spec)
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return err
	}
	journal, err := strconv.ParseUint(f[3], 10, 32)
	if err != nil {
		return err
	}
	in, err := os.Open(f[0])
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(f[1])
	if err != nil {
		return err
	}
	opts := Options{Size: size, Label: "gondolin-root", Seed: []byte("bench"), Epoch: testEpoch, JournalBlocks: uint32(journal)}
	if _, err := Build(context.Background(), out, in, opts); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// benchEntry is one file of a benchmark tree: its path and size.
type benchEntry struct {
	name string
	size int
}

// benchTrees are the trees BenchmarkBuild builds: "tree", 5,000 files of
// 100 B to 1 MiB (212 MB) in 50 directories, as an ordinary root file
// system; "dir", 10,000 small files (100 B to 4 kB, 17 MB) in one
// directory.
var benchTrees = []struct {
	name  string
	files func() []benchEntry
}{
	{"tree", func() []benchEntry {
		sizes := []int{100, 1000, 4000, 20000, 40000, 60000, 100000}
		var files []benchEntry
		for d := range 50 {
			for i := range 100 {
				n := sizes[(d*100+i)%len(sizes)]
				if i == 0 {
					n = 1 << 20
				}
				files = append(files, benchEntry{fmt.Sprintf("d%02d/f%03d", d, i), n})
			}
		}
		return files
	}},
	{"dir", func() []benchEntry {
		sizes := []int{100, 1000, 4000}
		var files []benchEntry
		for i := range 10000 {
			files = append(files, benchEntry{fmt.Sprintf("d/f%05d", i), sizes[i%len(sizes)]})
		}
		return files
	}},
}

// benchTree writes files (and the directories they are in) as a directory
// under root and as a tar file, the same tree with the same times, and
// returns the bytes of file content.
func benchTree(b *testing.B, files []benchEntry, root, tarPath string) int64 {
	b.Helper()
	tf, err := os.Create(tarPath)
	if err != nil {
		b.Fatal(err)
	}
	defer tf.Close()
	tw := tar.NewWriter(tf)
	mtime := time.Unix(testEpoch-3600, 0)
	var total int64
	add := func(h *tar.Header, body []byte) {
		h.ModTime, h.Format = mtime, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(p, os.FileMode(h.Mode))
		case tar.TypeReg:
			err = os.WriteFile(p, body, os.FileMode(h.Mode))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	dirs := map[string]bool{}
	for i, f := range files {
		if d := filepath.Dir(f.name); !dirs[d] {
			dirs[d] = true
			add(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}, nil)
		}
		add(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(f.size)}, randomBytes(uint64(i), f.size))
		total += int64(f.size)
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	// Directory times last: adding a file changes its directory's.
	err = filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// BenchmarkBuild builds a 1 GiB image of each tree in benchTrees with
// Build and with `mke2fs -t ext4 -d DIR`, alternately in one run, each
// writer a child process: sbx with the journal it gives a 1 GiB image
// (8192 blocks, as internal/build/image and mke2fs pick) against mke2fs's
// defaults (journal, metadata_csum, flex_bg), and for "tree" also both
// without a journal (sbx-nojournal, mke2fs-nojournal). Each iteration
// runs every writer once, the one that goes first rotating, and flushes
// each image to disk (untimed) before the next writer starts.
//
// It reports sbx's time per image as a multiple of mke2fs's
// (sbx/mke2fs; sbx-nojournal/mke2fs-nojournal), which both sides measure
// under the same load on a shared machine, unlike absolute times; each
// writer's time per image (NAME-ms); and the peak resident memory of sbx
// and of mke2fs as GNU time reports it (NAME-MiB; a Go parent's own
// rusage would count the parent's memory, which a vfork-style child
// shares until it execs), when /usr/bin/time is installed. ns/op is one
// image by each writer. Every image is checked with e2fsck afterwards.
func BenchmarkBuild(b *testing.B) {
	mke2fsPath := tool(b, "mke2fs")
	timeTool, _ := exec.LookPath("/usr/bin/time") // GNU time, for the children's memory
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 30
	for _, tc := range benchTrees {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			tree, tarPath := filepath.Join(dir, "tree"), filepath.Join(dir, "tree.tar")
			if err := os.Mkdir(tree, 0o755); err != nil {
				b.Fatal(err)
			}
			benchTree(b, tc.files(), tree, tarPath)
			sbx := func(journal int) func(img string) *exec.Cmd {
				return func(img string) *exec.Cmd {
					cmd := exec.Command(self, "-test.run=^$")
					cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d", benchEnv, tarPath, img, size, journal))
					return cmd
				}
			}
			mke2fs := func(extra ...string) func(img string) *exec.Cmd {
				return func(img string) *exec.Cmd {
					args := []string{"-q", "-F", "-t", "ext4", "-b", "4096", "-L", "gondolin-root",
						"-U", "6f1c2a7e-0000-4000-8000-000000000001",
						"-E", "root_owner=0:0,hash_seed=6f1c2a7e-0000-4000-8000-000000000002"}
					args = append(args, extra...)
					args = append(args, "-d", tree, img, strconv.Itoa(size>>10))
					cmd := exec.Command(mke2fsPath, args...)
					cmd.Env = append(os.Environ(), fmt.Sprintf("E2FSPROGS_FAKE_TIME=%d", testEpoch))
					return cmd
				}
			}
			writers := []benchWriter{{"sbx", sbx(8192)}, {"mke2fs", mke2fs()}}
			if tc.name == "tree" {
				writers = append(writers, benchWriter{"sbx-nojournal", sbx(0)}, benchWriter{"mke2fs-nojournal", mke2fs("-O", "^has_journal")})
			}
			out := b.TempDir()
			spent := make(map[string]time.Duration)
			peak := make(map[string]int64)
			n := 0
			for b.Loop() {
				for k := range writers {
					w := writers[(k+n)%len(writers)]
					img := filepath.Join(out, w.name+".ext4")
					os.Remove(img)
					cmd := w.cmd(img)
					rss := filepath.Join(out, w.name+".rss")
					if timeTool != "" {
						cmd.Args = append([]string{timeTool, "-f", "%M", "-o", rss}, cmd.Args...)
						cmd.Path = timeTool
					}
					start := time.Now()
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%v: %v\n%s", cmd.Args, err, out)
					}
					spent[w.name] += time.Since(start)
					b.StopTimer()
					syncImage(b, img)
					if timeTool != "" {
						peak[w.name] = max(peak[w.name], readRSS(b, rss))
					}
					b.StartTimer()
				}
				n++
			}
			b.StopTimer()
			for _, w := range writers {
				b.ReportMetric(float64(spent[w.name])/float64(time.Millisecond)/float64(n), w.name+"-ms")
				fsck(b, filepath.Join(out, w.name+".ext4"))
			}
			b.ReportMetric(float64(spent["sbx"])/float64(spent["mke2fs"]), "sbx/mke2fs")
			if tc.name == "tree" {
				b.ReportMetric(float64(spent["sbx-nojournal"])/float64(spent["mke2fs-nojournal"]), "sbx-nojournal/mke2fs-nojournal")
			}
			if timeTool != "" {
				b.ReportMetric(float64(peak["sbx"])/1024, "sbx-MiB")
				b.ReportMetric(float64(peak["mke2fs"])/1024, "mke2fs-MiB")
			}
		})
	}
}

// benchWriter is a writer BenchmarkBuild runs: the command that makes
// the image img.
type benchWriter struct {
	name string
	cmd  func(img string) *exec.Cmd
}

// syncImage flushes an image to disk.
func syncImage(b *testing.B, path string) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
}

// readRSS reads the maximum resident set, in KiB, that GNU time wrote.
func readRSS(b *testing.B, path string) int64 {
	b.Helper()
	kb, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(kb)), 10, 64)
	if err != nil {
		b.Fatalf("GNU time wrote %q in %s: %v", kb, path, err)
	}
	return n
}
