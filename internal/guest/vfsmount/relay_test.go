//go:build linux

package vfsmount

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"

	"github.com/sbx-dev/sbx/internal/socketpair"
	"github.com/sbx-dev/sbx/internal/vfs"
	"github.com/sbx-dev/sbx/policy"
)

// The relay between a port and the kernel's socket carries the host's
// 9P server to a client as the guest's kernel would see it: here the
// port is a socket pair and the client the 9P library's.
func TestRelayCarries9P(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("through the relay\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := vfs.New(policy.Mount{Guest: "/w", Host: ".", Access: policy.ReadWrite, Hide: []string{".env"}},
		vfs.Options{HostDir: dir, UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hostEnd, portEnd := socketpair.New(t)
	relayEnd, kernelEnd := socketpair.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, hostEnd) }()
	r := startRelay(portEnd, relayEnd)

	c, err := p9.NewClient(kernelEnd, p9.WithMessageSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	_, f, err := root.Walk([]string{"hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "through the relay\n" {
		t.Errorf("read %q, %v", buf[:n], err)
	}
	if _, _, err := root.Walk([]string{".env"}); err == nil {
		t.Errorf("walked to a hidden file through the relay")
	}

	// The host's end closing ends the relay, and the kernel's side sees
	// the end of its connection.
	cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not end when the host's end closed")
	}
	kernelEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := kernelEnd.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the kernel's side read %v after the relay ended; want EOF", err)
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Errorf("Serve did not return")
	}
}

// The kernel's side closing (an unmount) ends the relay too.
func TestRelayEndsWithKernelSide(t *testing.T) {
	hostEnd, portEnd := socketpair.New(t)
	relayEnd, kernelEnd := socketpair.New(t)
	r := startRelay(portEnd, relayEnd)
	kernelEnd.Close()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not end when the kernel's side closed")
	}
	hostEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := hostEnd.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the host read %v; want EOF", err)
	}
}
