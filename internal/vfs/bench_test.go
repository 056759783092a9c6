//go:build linux

package vfs

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hugelgupf/p9/fsimpl/localfs"
	"github.com/hugelgupf/p9/p9"

	"github.com/sbx-dev/sbx/internal/socketpair"
	"github.com/sbx-dev/sbx/policy"
)

// The benchmarks compare this server with the 9P library's own localfs
// (which follows symlinks and knows no rules: a baseline, not an
// option) over a unix socket pair, with the library's client — what the
// host side costs before any virtio-serial port or guest kernel is in
// the way. docs/decisions/0008-vfs-transport.md records a run.

const benchMsize = 512 << 10

func benchTree(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := os.WriteFile(filepath.Join(dir, "src", "pkg", fmt.Sprintf("f%03d.go", i)), []byte("package pkg\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// benchRoots returns the client roots of both servers on dir.
func benchRoots(b *testing.B, dir string) map[string]p9.File {
	b.Helper()
	m := policy.Mount{Guest: "/w", Host: ".", Access: policy.ReadWrite,
		Hide: []string{".env", "**/*.pem", ".git/config"}, ReadOnly: []string{".git/hooks"}, Tmpfs: []string{"node_modules"}}
	s, err := New(m, Options{HostDir: dir, UID: 1000, GID: 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	serve := func(name string, handle func(ctx context.Context, host net.Conn)) p9.File {
		host, guest := socketpair.New(b)
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		go handle(ctx, host)
		c, err := p9.NewClient(guest, p9.WithMessageSize(benchMsize))
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		root, err := c.Attach("")
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return root
	}
	return map[string]p9.File{
		"sbx": serve("sbx", func(ctx context.Context, c net.Conn) { s.Serve(ctx, c) }),
		"localfs": serve("localfs", func(ctx context.Context, c net.Conn) {
			p9.NewServer(localfs.Attacher(dir)).Handle(c, c)
		}),
	}
}

func BenchmarkStat(b *testing.B) {
	roots := benchRoots(b, benchTree(b))
	for _, name := range []string{"sbx", "localfs"} {
		root := roots[name]
		b.Run(name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				_, f, _, _, err := root.WalkGetAttr([]string{"src", "pkg", fmt.Sprintf("f%03d.go", i%100)})
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

func BenchmarkCreate(b *testing.B) {
	roots := benchRoots(b, benchTree(b))
	for _, name := range []string{"sbx", "localfs"} {
		root := roots[name]
		b.Run(name, func(b *testing.B) {
			_, dir, err := root.Walk([]string{"src"})
			if err != nil {
				b.Fatal(err)
			}
			// A directory of its own each time the body runs.
			sub := fmt.Sprintf("new-%s-%d", name, time.Now().UnixNano())
			if _, err := dir.Mkdir(sub, 0o755, 0, 0); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				_, d, err := root.Walk([]string{"src", sub})
				if err != nil {
					b.Fatal(err)
				}
				f, _, _, err := d.Create(fmt.Sprintf("c%d", i), p9.WriteOnly, 0o644, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	roots := benchRoots(b, benchTree(b))
	for _, name := range []string{"sbx", "localfs"} {
		root := roots[name]
		b.Run(name, func(b *testing.B) {
			_, f, err := root.Walk([]string{"big"})
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := f.Open(p9.ReadOnly); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 16<<20)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if n, err := f.ReadAt(buf, 0); n != len(buf) {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
		})
	}
}
