package ext4

import (
	"archive/tar"
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
	if _, err := Build(out, in, opts); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// benchTree writes the same tree of 5,000 files (about 200 MB in 50
// directories) as a directory and as a tar file, and returns the bytes of
// file content.
func benchTree(b *testing.B, root, tarPath string) int64 {
	b.Helper()
	tf, err := os.Create(tarPath)
	if err != nil {
		b.Fatal(err)
	}
	defer tf.Close()
	tw := tar.NewWriter(tf)
	mtime := time.Unix(testEpoch-3600, 0)
	sizes := []int{100, 1000, 4000, 20000, 40000, 60000, 100000}
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
		if err == nil {
			err = os.Chtimes(p, mtime, mtime)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for d := range 50 {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("d%02d/", d), Mode: 0o755}, nil)
		for i := range 100 {
			n := sizes[(d*100+i)%len(sizes)]
			if i == 0 {
				n = 1 << 20
			}
			body := randomBytes(uint64(d*100+i), n)
			add(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%02d/f%03d", d, i), Mode: 0o644, Size: int64(n)}, body)
			total += int64(n)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	return total
}

// BenchmarkBuild compares Build with mke2fs -d on the same tree in a
// 1 GiB image, each run as a child process: ns/op is the wall time of one
// image, peak-RSS-MiB the child's maximum resident memory as GNU time
// reports it (a Go parent's own rusage would count the parent's memory,
// which a vfork-style child shares until it execs).
func BenchmarkBuild(b *testing.B) {
	dir := b.TempDir()
	tree, tarPath := filepath.Join(dir, "tree"), filepath.Join(dir, "tree.tar")
	if err := os.Mkdir(tree, 0o755); err != nil {
		b.Fatal(err)
	}
	total := benchTree(b, tree, tarPath)
	const size = 1 << 30
	timeTool, _ := exec.LookPath("/usr/bin/time") // GNU time, for the children's memory
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
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
			cmd := exec.Command(tool(b, "mke2fs"), args...)
			cmd.Env = append(os.Environ(), fmt.Sprintf("E2FSPROGS_FAKE_TIME=%d", testEpoch))
			return cmd
		}
	}
	for _, c := range []struct {
		name string
		cmd  func(img string) *exec.Cmd
	}{
		{"sbx", sbx(0)},
		{"sbx-journal", sbx(8192)},
		{"mke2fs", mke2fs()},
		{"mke2fs-nojournal", mke2fs("-O", "^has_journal")},
	} {
		b.Run(c.name, func(b *testing.B) {
			img := filepath.Join(b.TempDir(), "image.ext4")
			rss := filepath.Join(b.TempDir(), "rss")
			b.SetBytes(total)
			var peak int64
			for b.Loop() {
				os.Remove(img)
				cmd := c.cmd(img)
				if timeTool != "" {
					cmd.Args = append([]string{timeTool, "-f", "%M", "-o", rss}, cmd.Args...)
					cmd.Path = timeTool
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%s", cmd.Args, err, out)
				}
				if timeTool != "" {
					kb, err := os.ReadFile(rss)
					if err != nil {
						b.Fatal(err)
					}
					n, err := strconv.ParseInt(strings.TrimSpace(string(kb)), 10, 64)
					if err != nil {
						b.Fatalf("GNU time wrote %q: %v", kb, err)
					}
					peak = max(peak, n)
				}
			}
			if timeTool != "" {
				b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
			}
			b.StopTimer()
			fsck(b, img)
		})
	}
}
