//go:build linux

package vfs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	fp "github.com/sbx-dev/sbx/internal/proto/fuseproto"
)

// Eight hostile clients of one session send random requests at once —
// lookups, forgets, renames, creates, opens, releases, listings, reads,
// writes, removals, links, truncations — over names that include hidden,
// read-only, tmpfs and git paths. Afterwards no hidden or read-only file
// has changed, been removed or left its class, nothing outside the mount
// has moved, DESTROY leaves no file, descriptor or listing counted, and
// the tmpfs limit counts exactly what the in-memory tree holds.
func TestFUSEConcurrentHostileRequests(t *testing.T) {
	base, work := tree(t)
	type kept struct {
		rel, data string
		class     Class
	}
	keep := map[uint64]kept{}
	for _, rel := range []string{"outside.txt", "work/.env", "work/.env.local", "work/.git/config", "work/.git/hooks/pre-commit", "work/secrets/db.txt", "work/vendor/lib.go", "work/src/certs/server.pem"} {
		b, err := os.ReadFile(filepath.Join(base, rel))
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		unix.Lstat(filepath.Join(base, rel), &st)
		keep[st.Ino] = kept{rel, string(b), 0}
	}
	c, _ := newFUSEClient(t, workspace(), work, Limits{Files: 256, OpenFiles: 32, TmpfsBytes: 4 << 20})
	for ino, k := range keep {
		if rel, ok := strings.CutPrefix(k.rel, "work/"); ok {
			k.class = c.f.fs.rules.Classify(rel)
			keep[ino] = k
		}
	}
	memBase := c.f.fs.mem.used
	names := []string{"a", "b", "c", "node_modules", "src", "d", ".env", "vendor", "secrets", ".git", "hooks", "config", "lib.go", "certs", "server.pem", "HEAD", "pre-commit"}
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	var mu sync.Mutex
	nodes := []uint64{1}
	fhs := []uint64{}
	pick := func(r *rand.Rand, ps *[]uint64) uint64 {
		mu.Lock()
		defer mu.Unlock()
		if len(*ps) == 0 {
			return uint64(r.IntN(50))
		}
		return (*ps)[r.IntN(len(*ps))]
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
				n := pick(r, &nodes)
				name := names[r.IntN(len(names))]
				switch r.IntN(17) {
				case 0:
					e, p := c.call(fp.OpLookup, n, fp.NameIn{Name: name})
					if e == 0 {
						mu.Lock()
						nodes = append(nodes, nodeOf(p))
						mu.Unlock()
					}
				case 1:
					c.call(fp.OpForget, n, fp.ForgetIn{Nlookup: uint64(r.IntN(3))})
				case 2:
					c.call(fp.OpRename, n, fp.RenameIn{NewDir: pick(r, &nodes), OldName: name, NewName: names[r.IntN(len(names))]})
				case 3:
					e, p := c.call(fp.OpCreate, n, fp.CreateIn{Flags: unix.O_RDWR, Mode: unix.S_IFREG | 0o644, Name: name})
					if e == 0 {
						mu.Lock()
						nodes = append(nodes, nodeOf(p))
						fhs = append(fhs, le64(p[fp.EntryOutSize:]))
						mu.Unlock()
					}
				case 4:
					e, p := c.call(fp.OpOpendir, n, fp.OpenIn{})
					if e == 0 {
						mu.Lock()
						fhs = append(fhs, le64(p))
						mu.Unlock()
					}
				case 5:
					e, p := c.call(fp.OpOpen, n, fp.OpenIn{Flags: uint32(r.IntN(3))})
					if e == 0 {
						mu.Lock()
						fhs = append(fhs, le64(p))
						mu.Unlock()
					}
				case 6:
					c.call(fp.OpRelease, 0, fp.ReleaseIn{Fh: pick(r, &fhs)})
				case 7:
					c.call(fp.OpReaddirplus, n, fp.ReadIn{Fh: pick(r, &fhs), Size: 4096, Offset: uint64(r.IntN(4))})
				case 8:
					c.call(fp.OpWrite, 0, fp.WriteIn{Fh: pick(r, &fhs), Offset: uint64(r.IntN(1 << 20)), Size: 4096, Data: make([]byte, 4096)})
				case 9:
					c.call(fp.OpRead, 0, fp.ReadIn{Fh: pick(r, &fhs), Size: 4096})
				case 10:
					c.call(fp.OpUnlink, n, fp.NameIn{Name: name})
				case 11:
					c.call(fp.OpMkdir, n, fp.MkdirIn{Mode: 0o755, Name: name})
				case 12:
					c.call(fp.OpRmdir, n, fp.NameIn{Name: name})
				case 14:
					c.call(fp.OpLink, n, fp.LinkIn{OldNodeID: pick(r, &nodes), Name: name})
				case 15:
					c.call(fp.OpSetattr, n, fp.SetattrIn{Valid: fp.SetattrSize, Size: uint64(r.IntN(1 << 19))})
				case 16:
					c.call(fp.OpSymlink, n, fp.SymlinkIn{Name: name, Target: "../x"})
				case 13:
					c.call(fp.OpGetattr, n, fp.GetattrIn{Flags: fp.GetattrFh, Fh: pick(r, &fhs)})
				}
			}
		}()
	}
	wg.Wait()
	c.call(fp.OpDestroy, 1, nil)
	if n := c.f.fs.files.Load(); n != 0 {
		t.Errorf("%d files after DESTROY", n)
	}
	if n := c.f.fs.open.Load(); n != 0 {
		t.Errorf("%d open after DESTROY", n)
	}
	if n := c.f.fs.listing.Load(); n != 0 {
		t.Errorf("%d listing bytes after DESTROY", n)
	}
	found := map[uint64]bool{}
	filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		unix.Lstat(p, &st)
		k, ok := keep[st.Ino]
		if !ok {
			return nil
		}
		found[st.Ino] = true
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(base, p)
		if string(b) != k.data {
			t.Errorf("%s (was %s) holds %q", rel, k.rel, b)
		}
		if wrel, ok := strings.CutPrefix(rel, "work/"); ok {
			if cl := c.f.fs.rules.Classify(wrel); cl != k.class {
				t.Errorf("%s (was %s, %v) is now %v", rel, k.rel, k.class, cl)
			} else if rel != k.rel {
				t.Logf("%s moved to %s, still %v", k.rel, rel, cl)
			}
		} else if rel != k.rel {
			t.Errorf("%s moved to %s", k.rel, rel)
		}
		return nil
	})
	for ino, k := range keep {
		if !found[ino] {
			t.Errorf("%s is gone", k.rel)
		}
	}
	seen := map[*memNode]bool{}
	var sum int64
	var walk func(kids map[string]*memNode)
	walk = func(kids map[string]*memNode) {
		for name, k := range kids {
			sum += int64(len(name))
			if seen[k] {
				continue
			}
			seen[k] = true
			sum += memNodeCost + int64(len(k.data)+len(k.target))
			if k.isDir() {
				walk(k.kids)
			}
		}
	}
	for _, kids := range c.f.fs.mem.roots {
		walk(kids)
	}
	t.Logf("tmpfs used %d (base %d), reachable %d", c.f.fs.mem.used, memBase, sum)
	if sum != c.f.fs.mem.used {
		t.Errorf("tmpfs counts %d bytes, holds %d", c.f.fs.mem.used, sum)
	}
}
