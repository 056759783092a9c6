package qcow2

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkConvert converts one 1 GiB sparse raw image holding 200 MB of
// random data (100 stretches of 2 MB, as a file system image scatters its
// data) with this package's ConvertFile and with `qemu-img convert -f raw
// -O qcow2`, alternately in one run: each iteration converts the image
// once with each, the one that goes first alternating, and flushes each
// output to disk (untimed) before the other side starts, so that neither
// pays for the other's write-back.
//
// It reports each side's time per image (sbx-ms, qemu-img-ms) and their
// ratio (sbx/qemu-img, sbx's time as a multiple of qemu-img's). The ratio
// is the figure to compare: both sides see the same load on a shared
// machine, which absolute times do not survive. ns/op is one image by each.
func BenchmarkConvert(b *testing.B) {
	tool := needQemuImg(b, "qemu-img")
	dir := b.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	c := rawCase{name: "bench", size: 1 << 30}
	for _, s := range r.Perm(128)[:100] {
		c.pieces = append(c.pieces, piece{int64(s) * 8 << 20, randBytes(r, 2_000_000)})
	}
	src := writeRaw(b, dir, c)
	sides := []struct {
		name, dst string
		convert   func(dst string) error
	}{
		{"sbx", filepath.Join(dir, "sbx.qcow2"), func(dst string) error { return ConvertFile(context.Background(), dst, src, Options{}) }},
		{"qemu-img", filepath.Join(dir, "qemu-img.qcow2"), func(dst string) error {
			if out, err := exec.Command(tool, "convert", "-f", "raw", "-O", "qcow2", src, dst).CombinedOutput(); err != nil {
				return fmt.Errorf("%s convert: %v\n%s", tool, err, out)
			}
			return nil
		}},
	}
	syncFile(b, src)
	spent := make([]time.Duration, len(sides))
	n := 0
	for b.Loop() {
		for k := range sides {
			i := (k + n) % len(sides)
			start := time.Now()
			if err := sides[i].convert(sides[i].dst); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
			b.StopTimer()
			syncFile(b, sides[i].dst)
			b.StartTimer()
		}
		n++
	}
	for i, s := range sides {
		b.ReportMetric(float64(spent[i])/float64(time.Millisecond)/float64(n), s.name+"-ms")
	}
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "sbx/qemu-img")
}

// syncFile flushes a file to disk.
func syncFile(b *testing.B, path string) {
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
