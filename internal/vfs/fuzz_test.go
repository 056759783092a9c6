//go:build linux

package vfs

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/socketpair"
)

// FuzzServe feeds a connection arbitrary bytes after a valid version
// and attach: the server must neither crash nor hang, whatever a guest
// sends.
//
// Each input is a connection, and a connection's 9P library side is
// never ended (conn.go says why): about 100 KiB and two goroutines stay
// behind per input, nothing in a sandbox (one connection per mount) but
// enough to exhaust a fuzzing worker after some tens of thousands of
// inputs, which go test -fuzz reports as a worker that "hung or
// terminated unexpectedly". Keep -fuzztime short.
func FuzzServe(f *testing.F) {
	msg := func(typ uint8, tag uint16, body ...[]byte) []byte {
		size := headerLen
		for _, b := range body {
			size += len(b)
		}
		m := binary.LittleEndian.AppendUint32(nil, uint32(size))
		m = append(m, typ)
		m = binary.LittleEndian.AppendUint16(m, tag)
		for _, b := range body {
			m = append(m, b...)
		}
		return m
	}
	f.Add(msg(tWalk, 2, u32(1), u32(2), u16(2), str("src"), str("main.go")))
	f.Add(msg(tWalk, 2, u32(1), u32(2), u16(1), str("..")))
	f.Add(msg(tLopen, 3, u32(1), u32(0)))
	f.Add(msg(tRead, 4, u32(1), u64(0), u32(1<<30)))
	f.Add(msg(msgTxattrcreate, 5, u32(1), str("user.x"), u64(1<<62), u32(0)))
	f.Add(msg(30, 6, u32(1), u32(9), str("")))
	f.Add(msg(tClunk, 7, u32(1)))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 1, 2, 3})
	f.Add(msg(tWalk, 2, u32(1), u32(2), u16(0xffff)))
	base := f.TempDir()
	work := filepath.Join(base, "work")
	if err := os.MkdirAll(filepath.Join(work, "src"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "src", "main.go"), []byte("package main\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".env"), []byte("SECRET\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(workspace(), Options{HostDir: work, UID: 1000, GID: 1000, Limits: Limits{Msize: 16 << 10, Requests: 4, Files: 64}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		host, guest := socketpair.New(t)
		done := make(chan error, 1)
		go func() { done <- s.Serve(context.Background(), host) }()
		// Replies are read and dropped so that the server never waits
		// on the guest.
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := guest.Read(buf); err != nil {
					return
				}
			}
		}()
		hello := msg(tVersion, 0xffff, u32(16<<10), str("9P2000.L"))
		hello = append(hello, msg(tAttach, 1, u32(1), u32(^uint32(0)), str("agent"), str(""), u32(1000))...)
		guest.Write(hello)
		guest.Write(data)
		guest.(interface{ CloseWrite() error }).CloseWrite()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("Serve did not return after the guest's end of input")
		}
		if b, err := os.ReadFile(filepath.Join(work, ".env")); err != nil || string(b) != "SECRET\n" {
			t.Fatalf(".env is now %q, %v", b, err)
		}
	})
}
