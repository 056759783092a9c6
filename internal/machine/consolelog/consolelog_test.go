package consolelog_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// stream is what a guest writes: numbered lines, n bytes in all.
func stream(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "console line %07d\n", i)
	}
	return b.Bytes()[:n]
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestWriterRotates writes three and a half times the cap in uneven
// pieces: each file holds at most the cap, the two hold exactly the
// stream's last bytes, and a write never passes the cap even by a byte.
func TestWriterRotates(t *testing.T) {
	const max = 1000
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	os.WriteFile(consolelog.Rotated(path), []byte("left from an older machine"), 0o600)
	w, err := consolelog.Create(path, max)
	if err != nil {
		t.Fatal(err)
	}
	if size(t, consolelog.Rotated(path)) != -1 {
		t.Error("Create kept an older rotated log")
	}
	data := stream(3*max + 500)
	for rest, i := data, 1; len(rest) > 0; i++ {
		k := min(len(rest), 37*i)
		if n, err := w.Write(rest[:k]); n != k || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		rest = rest[k:]
		if s := size(t, path); s > max {
			t.Fatalf("%s holds %d bytes, over the cap of %d", path, s, max)
		}
	}
	w.Close()
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(consolelog.Rotated(path))
	if len(cur) != 500 || len(old) != max {
		t.Errorf("files of %d and %d bytes, want 500 and %d", len(cur), len(old), max)
	}
	if got := append(old, cur...); !bytes.Equal(got, data[len(data)-len(got):]) {
		t.Error("the log is not the end of the stream")
	}
	for _, p := range []string{path, consolelog.Rotated(path)} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	// One write of many times the cap is cut the same way.
	w, err = consolelog.Create(path, max)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(data); n != len(data) || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	w.Close()
	if s1, s0 := size(t, path), size(t, consolelog.Rotated(path)); s1 != 500 || s0 != max {
		t.Errorf("after one large write: files of %d and %d bytes", s1, s0)
	}
	tail, err := consolelog.Tail(path, 2*max)
	if err != nil || !bytes.Equal(tail, data[len(data)-max-500:]) {
		t.Errorf("Tail across both files: %d bytes, %v", len(tail), err)
	}
	tail, _ = consolelog.Tail(path, 700)
	if !bytes.Equal(tail, data[len(data)-700:]) {
		t.Errorf("Tail(700) = %q", tail)
	}
}

// TestWriterRefusesSymlink: a log path that is a symbolic link is not
// followed.
func TestWriterRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, []byte("keep"), 0o600)
	path := filepath.Join(dir, "console.log")
	os.Symlink(target, path)
	if _, err := consolelog.Create(path, 100); err == nil {
		t.Error("Create followed a symbolic link")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was changed to %q", b)
	}
	if _, err := consolelog.Tail(path, 10); err == nil {
		t.Error("Tail followed a symbolic link")
	}
}

// sparse makes a file of n bytes that takes no disk, its last bytes
// "the end\n".
func sparse(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("the end\n"), n-8); err != nil {
		t.Fatal(err)
	}
}

// allocated runs f and returns how many bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeLogIsReadByItsEnd: a log of 100 MiB (a sparse file standing for
// one an older version let grow) is copied, tailed and moved by its end
// only, in bounded memory.
func TestHugeLogIsReadByItsEnd(t *testing.T) {
	const huge = 100 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	sparse(t, path, huge)

	var out countingWriter
	var skipped int64
	var err error
	alloc := allocated(func() { skipped, err = consolelog.CopyTail(&out, path, 1<<20) })
	if err != nil || out.n != 1<<20 || skipped != huge-1<<20 || !strings.HasSuffix(string(out.last), "the end\n") {
		t.Errorf("CopyTail: %d bytes, skipped %d, %v", out.n, skipped, err)
	}
	if alloc > 8<<20 {
		t.Errorf("CopyTail of 1 MiB of a 100 MiB file allocated %d bytes", alloc)
	}

	var tail []byte
	alloc = allocated(func() { tail, err = consolelog.Tail(path, 4096) })
	if err != nil || len(tail) != 4096 || !bytes.HasSuffix(tail, []byte("the end\n")) {
		t.Errorf("Tail: %d bytes, %v", len(tail), err)
	}
	if alloc > 1<<20 {
		t.Errorf("Tail of 4 KiB of a 100 MiB file allocated %d bytes", alloc)
	}

	// Moved, only the cap's worth is kept.
	dst := filepath.Join(dir, "kept.log")
	alloc = allocated(func() { err = consolelog.Move(path, dst, 1<<20) })
	if err != nil {
		t.Fatal(err)
	}
	if s := size(t, dst); s != 1<<20 {
		t.Errorf("moved log of %d bytes, want the cap's 1 MiB", s)
	}
	if b, _ := consolelog.Tail(dst, 8); string(b) != "the end\n" {
		t.Errorf("the moved log ends %q", b)
	}
	if alloc > 8<<20 {
		t.Errorf("Move of a 100 MiB log allocated %d bytes", alloc)
	}
	if size(t, path) != -1 {
		t.Error("Move left the source")
	}
}

type countingWriter struct {
	n    int64
	last []byte
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.last = append(w.last[:0], p[max(0, len(p)-64):]...)
	return len(p), nil
}

// TestMoveReplacesBoth: moving a log with one file removes the rotated
// file of the log it replaces, so the two never mix.
func TestMoveReplacesBoth(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "m", "console.log"), filepath.Join(dir, "console.log")
	os.Mkdir(filepath.Dir(src), 0o700)
	os.WriteFile(src, []byte("new\n"), 0o600)
	os.WriteFile(dst, []byte("old\n"), 0o600)
	os.WriteFile(consolelog.Rotated(dst), []byte("older\n"), 0o600)
	before, _ := os.Stat(src)
	if err := consolelog.Move(src, dst, 0); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(dst); err != nil || !os.SameFile(before, after) {
		t.Errorf("a log within its cap was not renamed (%v)", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new\n" || size(t, consolelog.Rotated(dst)) != -1 || size(t, src) != -1 {
		t.Errorf("after Move: %s holds %q, rotated %d bytes, source %d", dst, b, size(t, consolelog.Rotated(dst)), size(t, src))
	}
	// Nothing to move leaves dst alone.
	if err := consolelog.Move(src, dst, 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new\n" {
		t.Errorf("a Move of nothing changed %s to %q", dst, b)
	}
}

// slowLog blocks every write until released.
type slowLog struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (s *slowLog) Write(p []byte) (int, error) {
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// TestCaptureNeverHoldsUpTheStream: with a log that does not write at
// all, the capture still reads the whole stream (a guest's console is
// never held up), keeps at most its queue, and says in the log what it
// dropped once the log writes again.
func TestCaptureNeverHoldsUpTheStream(t *testing.T) {
	const queue = 4096
	r, w := io.Pipe()
	log := &slowLog{release: make(chan struct{})}
	c := consolelog.NewCapture(r, log, queue)
	data := stream(100 * queue)
	written := make(chan error, 1)
	go func() {
		_, err := w.Write(data)
		w.Close()
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream's writer was held up by a log that does not write")
	}
	close(log.release)
	if !c.Wait(30 * time.Second) {
		t.Fatal("the capture did not end with its stream")
	}
	got := log.buf.String()
	if c.Dropped() == 0 || c.Dropped() > int64(len(data)) {
		t.Fatalf("Dropped() = %d", c.Dropped())
	}
	kept := int64(len(data)) - c.Dropped()
	if kept > 2*queue || kept <= 0 {
		t.Errorf("the log got %d of the stream's bytes with a queue of %d", kept, queue)
	}
	// The log says, where it happened, what it lost, in all.
	var said int64
	for _, m := range lostRE.FindAllStringSubmatch(got, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		said += n
	}
	if said != c.Dropped() {
		t.Errorf("the log says %d bytes were lost, Dropped() %d:\n%.300s", said, c.Dropped(), got)
	}
	if i := strings.Index(got, "\n[sbx:"); i <= 0 || !strings.HasPrefix(string(data), got[:i]) {
		t.Error("what the log kept first is not the stream's start")
	}
}

var lostRE = regexp.MustCompile(`\n\[sbx: (\d+) bytes of console output lost: [^\]]*\]\n`)

// TestCaptureFlush: Flush returns once what was read is in the log.
func TestCaptureFlush(t *testing.T) {
	r, w := io.Pipe()
	var log syncBuffer
	c := consolelog.NewCapture(r, &log, 0)
	// The pipe's Write returns once the capture has the bytes in hand,
	// maybe not yet counted as read: Flush may need a second call.
	w.Write([]byte("sbx-guest: ready {}\n"))
	var got string
	for i := 0; i < 1000 && got == ""; i++ {
		if !c.Flush(10 * time.Second) {
			t.Fatal("Flush timed out")
		}
		if got = log.String(); got == "" {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if got != "sbx-guest: ready {}\n" {
		t.Errorf("after Flush the log holds %q", got)
	}
	w.Close()
	if !c.Wait(10*time.Second) || c.Dropped() != 0 {
		t.Errorf("Wait: dropped %d", c.Dropped())
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
