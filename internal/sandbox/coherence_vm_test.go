package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/vfs"
	"github.com/sbx-dev/sbx/policy"
)

// hostEditBound is how soon a host edit must be seen in the guest: the
// FUSE server's attribute and entry timeouts (vfs.DefaultFUSETimeout)
// on virtio-fs; 9P caches nothing, so it is well within.
const hostEditBound = vfs.DefaultFUSETimeout

// TestMountCoherence boots one sandbox with the same host tree mounted
// twice, over 9P and over virtio-fs, and measures for each, from inside
// the guest: that a host edit to a file the guest has just read (its
// attributes and pages cached) is seen by every read that starts
// hostEditBound or later after the edit was made, and that
// the guest's writes are in the host's file once the guest's close or
// fsync has returned (the host reads them while the guest's process
// still runs, right after it says so).
func TestMountCoherence(t *testing.T) {
	_, _, img := machinetest.Require(t)
	host := t.TempDir()
	mdir, err := os.MkdirTemp("", "sbx-co-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mdir)
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		t.Fatal(err)
	}
	transports := []sandboxfs.Transport{sandboxfs.Transport9P, sandboxfs.TransportVirtioFS}
	var pm []policy.Mount
	var mounts []sandboxfs.Mount
	for _, tr := range transports {
		dir := filepath.Join(host, string(tr))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m := policy.Mount{Guest: "/mnt/" + string(tr), Host: dir, Access: policy.ReadWrite, Owner: machinetest.User}
		pm = append(pm, m)
		mounts = append(mounts, sandboxfs.Mount{Policy: m, HostDir: dir, UID: machinetest.UID, GID: machinetest.UID, Transport: tr})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Spec{Name: "co", Image: si, Memory: 512 << 20, Policy: policy.Sandbox{Mounts: pm}, Mounts: mounts},
		sandbox.Options{Dir: mdir, CA: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())

	// exec runs script in the guest in the background; its output and
	// exit code arrive on the channel.
	type result struct {
		out  string
		code int
		err  error
	}
	exec := func(script string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			st, err := sb.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", script}, User: machinetest.User, Stdout: &out, Stderr: &out})
			ch <- result{out.String(), st.Code, err}
		}()
		return ch
	}
	// waitFor waits, bounded, for the guest to make name on the host.
	waitFor := func(name string, done <-chan result) {
		t.Helper()
		for range 1200 {
			if _, err := os.Lstat(name); err == nil {
				return
			}
			select {
			case r := <-done:
				t.Fatalf("the guest ended before making %s: exit %d, %v\n%s", filepath.Base(name), r.code, r.err, r.out)
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Fatalf("the guest never made %s", name)
	}

	for _, tr := range transports {
		dir, gdir := filepath.Join(host, string(tr)), "/mnt/"+string(tr)
		t.Run(string(tr)+"/host-edit", func(t *testing.T) {
			file := filepath.Join(dir, "edited.txt")
			if err := os.WriteFile(file, []byte("before the edit\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// The guest reads the file (caching what it may), says
			// so, waits for the host's word that the edit is made
			// (a new name: lookups of missing names are not
			// cached), then reads the file every 20 ms, printing
			// for each read when it started, in the guest's
			// hundredths of a second since it had the word, and
			// whether it saw the edit; it stops after three reads
			// past the bound. A slow guest only makes reads start
			// later: every one that starts past the bound must see
			// the edit.
			done := exec(fmt.Sprintf(`cd %s
cat edited.txt >/dev/null; stat edited.txt >/dev/null
echo ready > ready
i=0; while [ ! -e edit-made ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done
read up _ < /proc/uptime; start=${up%%%%.*}${up#*.}
i=0; past=0; while [ $i -lt 300 ] && [ $past -lt 3 ]; do
  read up _ < /proc/uptime; at=$((${up%%%%.*}${up#*.} - start))
  if [ $at -ge %d ]; then past=$((past+1)); fi
  if [ "$(cat edited.txt)" = "after the host's edit, longer" ]; then echo "$at new"; else echo "$at old"; fi
  sleep 0.02; i=$((i+1))
done`, gdir, hostEditBound/(10*time.Millisecond)))
			waitFor(filepath.Join(dir, "ready"), done)
			if err := os.WriteFile(file, []byte("after the host's edit, longer\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "edit-made"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.code != 0 {
				t.Fatalf("exit %d, %v: %s", r.code, r.err, r.out)
			}
			first, past := -1, 0
			for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
				var cs int
				var seen string
				if _, err := fmt.Sscanf(l, "%d %s", &cs, &seen); err != nil {
					t.Fatalf("%q: %v", r.out, err)
				}
				if seen == "new" && first < 0 {
					first = cs
				}
				if time.Duration(cs)*10*time.Millisecond >= hostEditBound {
					past++
					if seen != "new" {
						t.Errorf("%s: a read %v after the host's edit saw the old file; the bound is %v", tr, time.Duration(cs)*10*time.Millisecond, hostEditBound)
					}
				}
			}
			if past == 0 {
				t.Fatalf("%s: no read started past the bound:\n%s", tr, r.out)
			}
			if first >= 0 {
				t.Logf("%s: a host edit was first seen by a read %v after it was made", tr, time.Duration(first)*10*time.Millisecond)
			}
		})
		t.Run(string(tr)+"/guest-write", func(t *testing.T) {
			// Two files written in the guest: a small one closed, and
			// 4 MiB written and fsynced with the file still open. After
			// each the guest makes a marker and waits; the host reads
			// the file as soon as it sees the marker.
			done := exec(fmt.Sprintf(`cd %s
{ echo "closed by the guest"; } > small.txt
echo x > small-closed
i=0; while [ ! -e small-read ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done
exec 3> big.bin
head -c 4194304 /dev/urandom >&3
sync big.bin 2>/dev/null || sync
sha256sum big.bin > /tmp/big.sum
echo x > big-synced
i=0; while [ ! -e big-read ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done
exec 3>&-
cat /tmp/big.sum`, gdir))
			waitFor(filepath.Join(dir, "small-closed"), done)
			small, err := os.ReadFile(filepath.Join(dir, "small.txt"))
			if err != nil || string(small) != "closed by the guest\n" {
				t.Errorf("%s: the guest's closed file on the host: %q, %v", tr, small, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "small-read"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			waitFor(filepath.Join(dir, "big-synced"), done)
			big, err := os.ReadFile(filepath.Join(dir, "big.bin"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "big-read"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.code != 0 {
				t.Fatalf("exit %d, %v: %s", r.code, r.err, r.out)
			}
			want, _, _ := strings.Cut(r.out, " ")
			if got := fmt.Sprintf("%x", sha256.Sum256(big)); len(big) != 4<<20 || got != want {
				t.Errorf("%s: the guest's synced file on the host: %d bytes, sha256 %s; the guest's %s", tr, len(big), got, strconv.Quote(want))
			}
		})
	}
	if st := sb.Started(); st.Mounts != "" {
		t.Errorf("every mount named its transport, yet Started.Mounts is %q", st.Mounts)
	}
}
