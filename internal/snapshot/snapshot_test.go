package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/internal/snapshot"
)

const testMemory = 4 << 20

func testShape(t *testing.T) snapshot.Shape {
	return snapshot.Shape{
		Kernel: "sha256:k", Initrd: "sha256:i", Disk: "sha256:d",
		DiskPath: filepath.Join(t.TempDir(), "image.qcow2"),
		Platform: "linux/amd64", CPUs: 1, Memory: testMemory,
		Ports: []string{"sbx.vfs.0"}, Hypervisor: "qemu test",
	}
}

// fakeSave is a SaveFunc that writes what a saved machine leaves, as
// QEMU leaves it (the memory and disk readable by all): mark tells
// one save's files from another's.
func fakeSave(shape snapshot.Shape, mark string) snapshot.SaveFunc {
	return func(ctx context.Context, memory string, state *os.File, disk string) (snapshot.Saved, error) {
		f, err := os.OpenFile(memory, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return snapshot.Saved{}, err
		}
		defer f.Close()
		if err := f.Truncate(shape.Memory); err != nil {
			return snapshot.Saved{}, err
		}
		if _, err := f.WriteAt([]byte("guest memory "+mark), 8192); err != nil {
			return snapshot.Saved{}, err
		}
		if _, err := state.WriteString("device state " + mark); err != nil {
			return snapshot.Saved{}, err
		}
		if err := qcow2.CreateOverlay(disk, shape.DiskPath, "qcow2", 64<<20); err != nil {
			return snapshot.Saved{}, err
		}
		return snapshot.Saved{MAC: "52:54:00:5b:78:01", Ready: bootproto.Ready{Kernel: "6.1"}}, nil
	}
}

func create(t *testing.T, dir string, shape snapshot.Shape, mark string) *snapshot.Cache {
	t.Helper()
	c, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Create(context.Background(), shape, fakeSave(shape, mark)); err != nil {
		t.Fatal(err)
	}
	return c
}

func readState(t *testing.T, s *snapshot.Snapshot) string {
	t.Helper()
	r, err := s.Resume()
	if err != nil {
		t.Fatal(err)
	}
	defer r.State.Close()
	b, err := io.ReadAll(r.State)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCreateGet(t *testing.T) {
	dir := t.TempDir()
	shape := testShape(t)
	c := create(t, dir, shape, "one")
	key := shape.Key()
	for _, name := range []string{snapshot.StateFile, snapshot.MemoryFile, snapshot.DiskFile, snapshot.MetaFile} {
		fi, err := os.Stat(filepath.Join(dir, key, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, key)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the snapshot's directory: %v %v", fi.Mode(), err)
	}
	s, err := c.Get(shape)
	if err != nil {
		t.Fatal(err)
	}
	// Two resumes read the whole state each, each from its start.
	for range 2 {
		if got := readState(t, s); got != "device state one" {
			t.Errorf("state %q", got)
		}
	}
	if _, err := s.Memory.WriteAt([]byte("x"), 0); err == nil {
		t.Error("the memory can be written")
	}
}

// TestVerified: a resume loads the state and is made over the disk
// that were verified, whatever is written to their paths after, and a
// snapshot removed and saved again since it was loaded is not mixed
// with the old one: the old resumes of its own files, Get returns the
// new.
func TestVerified(t *testing.T) {
	dir := t.TempDir()
	shape := testShape(t)
	c := create(t, dir, shape, "one")
	s, err := c.Get(shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shape.Key(), snapshot.StateFile), []byte("planted state"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, s); got != "device state one" {
		t.Errorf("resumed with state %q, not the one verified", got)
	}
	diskPath := filepath.Join(dir, shape.Key(), snapshot.DiskFile)
	verified, err := os.Stat(diskPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(diskPath, diskPath+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(diskPath, []byte("planted disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resume()
	if err != nil {
		t.Fatal(err)
	}
	r.State.Close()
	if fi, err := r.DiskFile.Stat(); err != nil || !os.SameFile(fi, verified) {
		t.Errorf("resumed over another disk than the one verified: %v", err)
	}
	os.Rename(diskPath+".old", diskPath)

	// Another process removes the snapshot and saves it again.
	other, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Remove(shape.Key()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if _, err := other.Create(context.Background(), shape, fakeSave(shape, "two")); err != nil {
		t.Fatal(err)
	}
	// The snapshot loaded before resumes of its own files, all three.
	r, err = s.Resume()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.State)
	r.State.Close()
	disk, _ := io.ReadAll(io.NewSectionReader(r.DiskFile, 0, 1<<30))
	sum := sha256.Sum256(disk)
	if string(b) != "device state one" || "sha256:"+hex.EncodeToString(sum[:]) != s.Meta.Disk {
		t.Errorf("the snapshot loaded before resumes with state %q and another disk", b)
	}
	s2, err := c.Get(shape)
	if err != nil {
		t.Fatal(err)
	}
	if got := readState(t, s2); got != "device state two" {
		t.Errorf("after the snapshot was saved again: state %q", got)
	}
	// A machine may still be starting from the old one: its files stay
	// open.
	if _, err := s.Memory.Stat(); err != nil {
		t.Errorf("the old snapshot's memory was closed: %v", err)
	}
	if got := readState(t, s); got != "device state one" {
		t.Errorf("the old snapshot after the new one was loaded: state %q", got)
	}
	mem := make([]byte, 16)
	s2.Memory.ReadAt(mem, 8192)
	if !bytes.HasPrefix(mem, []byte("guest memory two")) {
		t.Errorf("after the snapshot was saved again: memory %q", mem)
	}
}

// rewriteMeta edits a snapshot's meta.json.
func rewriteMeta(t *testing.T, dir string, edit func(m *snapshot.Meta)) {
	t.Helper()
	p := filepath.Join(dir, snapshot.MetaFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m snapshot.Meta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func digest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestRefused: a snapshot whose files do not verify, or that was
// planted rather than saved, is an error (not ErrMissing, so the caller
// warns and boots) and is removed; nothing outside the cache is
// followed, read as the snapshot or removed.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, snap, outside string)
		want  string
	}{
		{"truncated state", func(t *testing.T, snap, _ string) {
			os.Truncate(filepath.Join(snap, snapshot.StateFile), 3)
		}, "state has digest"},
		{"garbled state", func(t *testing.T, snap, _ string) {
			os.WriteFile(filepath.Join(snap, snapshot.StateFile), []byte("device state ONE"), 0o600)
		}, "state has digest"},
		{"garbled meta", func(t *testing.T, snap, _ string) {
			os.WriteFile(filepath.Join(snap, snapshot.MetaFile), []byte("{"), 0o600)
		}, "meta.json"},
		{"meta of another shape", func(t *testing.T, snap, _ string) {
			rewriteMeta(t, snap, func(m *snapshot.Meta) { m.Shape.CPUs = 2 })
		}, "another shape"},
		{"memory truncated", func(t *testing.T, snap, _ string) {
			os.Truncate(filepath.Join(snap, snapshot.MemoryFile), 1<<20)
		}, "not of the size"},
		{"memory of another size, meta to match", func(t *testing.T, snap, _ string) {
			os.Truncate(filepath.Join(snap, snapshot.MemoryFile), 1<<20)
			rewriteMeta(t, snap, func(m *snapshot.Meta) { m.MemorySize = 1 << 20 })
		}, "the machine has"},
		{"garbled memory", func(t *testing.T, snap, _ string) {
			f, _ := os.OpenFile(filepath.Join(snap, snapshot.MemoryFile), os.O_RDWR, 0)
			f.WriteAt([]byte("GUEST"), 8192)
			f.Close()
		}, "memory has digest"},
		{"disk over another backing file, meta to match", func(t *testing.T, snap, outside string) {
			disk := filepath.Join(snap, snapshot.DiskFile)
			os.Remove(disk)
			if err := qcow2.CreateOverlay(disk, filepath.Join(outside, "other.qcow2"), "qcow2", 64<<20); err != nil {
				t.Fatal(err)
			}
			os.Chmod(disk, 0o600)
			d := digest(t, disk)
			rewriteMeta(t, snap, func(m *snapshot.Meta) { m.Disk = d })
		}, "not of the image's disk"},
		{"disk with an external data file, meta to match", func(t *testing.T, snap, outside string) {
			disk := filepath.Join(snap, snapshot.DiskFile)
			f, _ := os.OpenFile(disk, os.O_RDWR, 0)
			var b [8]byte
			f.ReadAt(b[:], 72)
			binary.BigEndian.PutUint64(b[:], binary.BigEndian.Uint64(b[:])|1<<2)
			f.WriteAt(b[:], 72)
			f.Close()
			d := digest(t, disk)
			rewriteMeta(t, snap, func(m *snapshot.Meta) { m.Disk = d })
		}, "external data file"},
		{"state a symbolic link", func(t *testing.T, snap, outside string) {
			p := filepath.Join(snap, snapshot.StateFile)
			os.Rename(p, filepath.Join(outside, "state"))
			os.Symlink(filepath.Join(outside, "state"), p)
		}, "state"},
		{"memory a FIFO", func(t *testing.T, snap, _ string) {
			p := filepath.Join(snap, snapshot.MemoryFile)
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "memory is of type"},
		{"state writable by others", func(t *testing.T, snap, _ string) {
			os.Chmod(filepath.Join(snap, snapshot.StateFile), 0o666)
		}, "may be written by others"},
		{"disk another user's", func(t *testing.T, snap, _ string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			os.Chown(filepath.Join(snap, snapshot.DiskFile), 4321, 4321)
		}, "belongs to user 4321"},
		{"the snapshot's directory a symbolic link", func(t *testing.T, snap, outside string) {
			moved := filepath.Join(outside, "snap")
			os.Rename(snap, moved)
			os.Symlink(moved, snap)
		}, "is of type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			shape := testShape(t)
			create(t, dir, shape, "one")
			snap := filepath.Join(dir, shape.Key())
			tc.spoil(t, snap, outside)
			outsideBefore, _ := os.ReadDir(outside)

			c, err := snapshot.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				s, err := c.Get(shape)
				if err == nil || errors.Is(err, snapshot.ErrMissing) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Get: %v %v, want an error with %q", s, err, tc.want)
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Get hangs")
			}
			if _, err := os.Lstat(snap); !os.IsNotExist(err) {
				t.Errorf("the snapshot was not removed: %v", err)
			}
			if after, _ := os.ReadDir(outside); len(after) != len(outsideBefore) {
				t.Errorf("outside the cache: %v, then %v", outsideBefore, after)
			}
			// The next start saves it again.
			if _, err := c.Create(context.Background(), shape, fakeSave(shape, "two")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenPrivate: the cache directory is made private when it is this
// user's, and refused when it is another's.
func TestOpenPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	c, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("the cache has mode %v, want 0700", fi.Mode().Perm())
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory away")
	}
	if err := os.Chown(dir, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	if c, err := snapshot.Open(dir); err == nil {
		c.Close()
		t.Error("opened a cache of another user's")
	}
}

// TestPlantedLock: a lock file planted as a symbolic link is not
// followed (the file it names is not created).
func TestPlantedLock(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	shape := testShape(t)
	target := filepath.Join(outside, "created")
	if err := os.Symlink(target, filepath.Join(dir, "."+shape.Key()+".lock")); err != nil {
		t.Fatal(err)
	}
	c, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Create(context.Background(), shape, fakeSave(shape, "one"))
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the lock's symbolic link was followed: %v", err)
	}
}

// TestStaleSave: what a save that died left is removed by the next.
func TestStaleSave(t *testing.T) {
	dir := t.TempDir()
	shape := testShape(t)
	stale := filepath.Join(dir, ".new-"+shape.Key()+"-12345")
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, snapshot.MemoryFile), []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	create(t, dir, shape, "one")
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("a dead save's directory is left: %v", err)
	}
}
