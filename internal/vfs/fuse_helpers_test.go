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

// run runs a program with a bound on its time and returns its output.
func run(t testing.TB, dir string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
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
