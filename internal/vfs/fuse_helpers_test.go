//go:build linux

package vfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	fp "github.com/sbx-dev/sbx/internal/proto/fuseproto"
	"github.com/sbx-dev/sbx/policy"
)

// fuseMount serves m on work through the host kernel's FUSE client and
// returns the mount point. The mount is detached, the session ended
// and the server closed when the test ends.
func fuseMount(t testing.TB, m policy.Mount, work string, lim Limits) (string, *Server) {
	t.Helper()
	s, err := New(m, Options{HostDir: work, UID: 1000, GID: 1001, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	f := s.FUSE(FUSEOptions{})
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		s.Close()
		t.Fatalf("/dev/fuse: %v", err)
	}
	var fd int
	rc, _ := dev.SyscallConn()
	rc.Control(func(u uintptr) { fd = int(u) })
	mnt := t.TempDir()
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions,max_read=%d", fd, f.maxWrite)
	if err := unix.Mount("sbx", mnt, "fuse.sbx", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		dev.Close()
		s.Close()
		t.Fatalf("mount fuse: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ServeDev(ctx, dev) }()
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount: %v", err)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("ServeDev: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("ServeDev did not return within 10s of the unmount")
		}
		dev.Close()
		f.Close()
		s.Close()
	})
	return mnt, s
}

// run runs a program with a bound on its time and returns its output;
// git runs in dir (git -C), other programs name their paths.
//
// The child never starts in a directory of a mount this process
// serves: between fork and exec it would chdir there and wait for the
// server, while the forking thread holds one of the Go scheduler's Ps
// in a raw clone; a garbage collection starting then can never stop
// that P, so no goroutine answers and the process hangs for good.
func run(t testing.TB, dir string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if name == "git" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// fuseClient speaks FUSE to a session through Handle, as a kernel
// would, without one.
type fuseClient struct {
	t      testing.TB
	f      *FUSE
	unique atomic.Uint64
}

func newFUSEClient(t testing.TB, m policy.Mount, work string, lim Limits) (*fuseClient, *Server) {
	t.Helper()
	s, err := New(m, Options{HostDir: work, UID: 1000, GID: 1001, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	c := &fuseClient{t: t, f: s.FUSE(FUSEOptions{})}
	t.Cleanup(func() { c.f.Close(); s.Close() })
	if e, _ := c.call(fp.OpInit, 0, fp.InitIn{Major: 7, Minor: 38, MaxReadahead: 1 << 17, Flags: 0xffffffff}); e != 0 {
		t.Fatalf("INIT: %v", e)
	}
	return c, s
}

// call sends one request and returns the reply's errno and payload.
func (c *fuseClient) call(op fp.Opcode, node uint64, args any) (syscall.Errno, []byte) {
	u := c.unique.Add(1)
	req := fp.EncodeRequest(fp.InHeader{Opcode: op, Unique: u, NodeID: node}, args)
	return c.raw(u, req)
}

func (c *fuseClient) raw(u uint64, req ...[]byte) (syscall.Errno, []byte) {
	c.t.Helper()
	out := make([]byte, c.f.MaxRequest())
	n := c.f.Handle(req, [][]byte{out})
	if n == 0 {
		return 0, nil
	}
	l, e, gotU, ok := fp.OutHeader(out[:n])
	if !ok || int(l) != n || gotU != u {
		c.t.Fatalf("reply of %d bytes: header len %d unique %d (want %d)", n, l, gotU, u)
	}
	return e, out[fp.OutHeaderSize:n]
}

// nodeOf decodes an entry reply's node ID.
func nodeOf(p []byte) uint64 {
	if len(p) < 8 {
		return 0
	}
	return le64(p)
}

// walkTo looks up each name of the slash-separated path rel from the
// root, and returns the node or the first errno.
func (c *fuseClient) walkTo(rel string) (uint64, syscall.Errno) {
	id := uint64(fp.RootID)
	if rel == "" {
		return id, 0
	}
	for _, name := range strings.Split(rel, "/") {
		e, p := c.call(fp.OpLookup, id, fp.NameIn{Name: name})
		if e != 0 {
			return 0, e
		}
		id = nodeOf(p)
	}
	return id, 0
}

// parentOf walks to rel's directory and returns it with rel's name.
func (c *fuseClient) parentOf(rel string) (uint64, string, syscall.Errno) {
	dir, name := splitRel(rel)
	id, e := c.walkTo(dir)
	return id, name, e
}

// errnoOfPath is the errno of an os call's error, 0 for nil.
func errnoOfPath(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// Files on a mount this process serves are read and written with
// system calls, not package os: os registers every file it opens with
// the runtime's poller, and epoll_ctl on a FUSE file asks the server
// (FUSE_POLL) from inside the runtime, on a thread that keeps its P;
// should a garbage collection start then, it waits for that P while
// the server's goroutines wait for the collection, for good. (A guest
// kernel's processes are not this process; only tests meet this.)

func readFile(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for range 1 << 12 {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return out, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	return out, nil
}

func writeFile(p string, data []byte, perm uint32) error {
	return writeFlags(p, data, perm, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, false)
}

func writeFlags(p string, data []byte, perm uint32, flags int, sync bool) error {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, perm)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err != nil {
			return &os.PathError{Op: "write", Path: p, Err: err}
		}
		data = data[n:]
	}
	if sync {
		if err := unix.Fsync(fd); err != nil {
			return &os.PathError{Op: "fsync", Path: p, Err: err}
		}
	}
	return nil
}
