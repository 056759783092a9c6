package image_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
)

// stages records the stages a build reports.
type stages struct {
	mu   sync.Mutex
	list []image.Stage
}

func (s *stages) add(st image.Stage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, st)
}

func (s *stages) get() []image.Stage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// TestBuild builds a small image end to end, from an in-process OCI
// registry, a fake npm registry, a local file and the real Debian kernel,
// and checks reproducibility, caching, the disk's contents, that it boots,
// and the Gondolin export.
func TestBuild(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	cfg, lock := w.configure(t, specOptions{})
	img, li := cfg.Images["box"], lock.Lookup("box")
	if len(li.Outputs) != 0 {
		t.Fatalf("a fresh lock records outputs: %v", li.Outputs)
	}
	// The kernel is loaded once per test binary; do it before timing.
	testAgent(t)

	cacheA := newCache(t)
	var st stages
	opts := w.options(t, cacheA)
	opts.Stage = st.add
	start := time.Now()
	r1, err := image.Build(ctx, img, li, opts)
	cold := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Cached {
		t.Error("the first build into an empty cache says it was cached")
	}
	wantStages := []image.Stage{image.StageFetch, image.StageRootfs, image.StageExt4, image.StageQcow2, image.StageKernel, image.StageInitramfs, image.StageStore}
	if got := st.get(); !slices.Equal(got, wantStages) {
		t.Errorf("stages %v, want %v", got, wantStages)
	}
	checkResult(t, r1, li.InputHash)

	t.Run("warm cache", func(t *testing.T) {
		var st stages
		opts := w.options(t, cacheA)
		opts.Stage = st.add
		hits, loads := w.hits(), shared.loads.Load()
		start := time.Now()
		r2, err := image.Build(ctx, img, li, opts)
		warm := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("build of the test image: cold %v (kernel loaded once per test binary), warm %v", cold.Round(time.Millisecond), warm.Round(time.Millisecond))
		if !r2.Cached {
			t.Error("the second build with the same key was not a cache hit")
		}
		if n := w.hits() - hits; n != 0 {
			t.Errorf("the cached build made %d requests to the sources", n)
		}
		if shared.loads.Load() != loads {
			t.Error("the cached build loaded the kernel")
		}
		if got := st.get(); !slices.Equal(got, []image.Stage{image.StageCached}) {
			t.Errorf("stages of a cached build: %v", got)
		}
		if r2.BuildKey != r1.BuildKey || !sameOutputs(r1, r2) {
			t.Errorf("the cached build differs:\n%+v\n%+v", r1, r2)
		}
	})

	t.Run("local file changed", func(t *testing.T) {
		data := filepath.Join(w.dir, "data.txt")
		writeFile(t, data, "edited after the lock\n")
		defer writeFile(t, data, "local data\n")
		_, err := image.Build(ctx, img, li, w.options(t, cacheA))
		if err == nil || !strings.Contains(err.Error(), "artifact.data") || !strings.Contains(err.Error(), "changed since it was locked") {
			t.Errorf("a cache hit with a local file changed since the lock: %v", err)
		}
	})

	t.Run("local file linked out of the configuration directory", func(t *testing.T) {
		// The same bytes, but read through a link to a file outside the
		// configuration directory: a cache hit must not hide it.
		data := filepath.Join(w.dir, "data.txt")
		outside := filepath.Join(t.TempDir(), "data.txt")
		writeFile(t, outside, "local data\n")
		if err := os.Remove(data); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, data); err != nil {
			t.Fatal(err)
		}
		defer func() {
			os.Remove(data)
			writeFile(t, data, "local data\n")
		}()
		_, err := image.Build(ctx, img, li, w.options(t, cacheA))
		if err == nil || !strings.Contains(err.Error(), "artifact.data") || !strings.Contains(err.Error(), "leads outside the configuration directory") {
			t.Errorf("a cache hit with a local file linked out of the configuration directory: %v", err)
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		cacheB := newCache(t)
		r3, err := image.Build(ctx, img, li, w.options(t, cacheB))
		if err != nil {
			t.Fatal(err)
		}
		if r3.Cached {
			t.Error("a build into a second empty cache says it was cached")
		}
		for _, name := range []string{image.OutputKernel, image.OutputInitramfs, image.OutputDisk, image.OutputAgent} {
			if a, b := r1.Outputs[name].Digest, r3.Outputs[name].Digest; a != b {
				t.Errorf("output %s differs between two cold builds: %s and %s", name, a, b)
			}
		}
		if !bytes.Equal(readFile(t, r1.Manifest), readFile(t, r3.Manifest)) {
			t.Error("the manifests of two cold builds differ")
		}

		// An output damaged in the cache is not a hit: the build is made
		// again, to the same bytes.
		disk := r3.Outputs[image.OutputDisk].Path
		if err := os.Chmod(disk, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(disk, []byte("damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
		r4, err := image.Build(ctx, img, li, w.options(t, cacheB))
		if err != nil {
			t.Fatal(err)
		}
		if r4.Cached || r4.Outputs[image.OutputDisk].Digest != r1.Outputs[image.OutputDisk].Digest {
			t.Errorf("after damage: cached %v, disk %s, want a rebuild to %s", r4.Cached, r4.Outputs[image.OutputDisk].Digest, r1.Outputs[image.OutputDisk].Digest)
		}
		if got := sha256File(t, disk); got != r1.Outputs[image.OutputDisk].Digest {
			t.Errorf("the damaged disk was not replaced: %s", got)
		}
	})

	t.Run("verify", func(t *testing.T) {
		var st stages
		opts := w.options(t, cacheA)
		opts.Verify = true
		opts.Stage = st.add
		r, err := image.Build(ctx, img, li, opts)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if !sameOutputs(r, r1) {
			t.Errorf("verify returned other outputs")
		}
		if !slices.Contains(st.get(), image.StageVerify) || !slices.Contains(st.get(), image.StageExt4) {
			t.Errorf("verify did not rebuild: stages %v", st.get())
		}

		// Against a lock that records other hashes, verify names each.
		bad := lockWithOutputs(li, map[string]string{
			image.OutputKernel:    r1.Outputs[image.OutputKernel].Digest,
			image.OutputInitramfs: "sha256:" + strings.Repeat("1", 64),
			image.OutputDisk:      "sha256:" + strings.Repeat("2", 64),
		})
		_, err = image.Build(ctx, img, bad, opts)
		var verr *image.VerifyError
		if !errors.As(err, &verr) {
			t.Fatalf("verify against wrong lock hashes: %v, want a *VerifyError", err)
		}
		if got := verr.Outputs(); !slices.Equal(got, []string{image.OutputInitramfs, image.OutputDisk}) {
			t.Errorf("differing outputs %v, want initramfs and disk", got)
		}
		for _, s := range []string{strings.Repeat("2", 64), r1.Outputs[image.OutputDisk].Digest, "the lock file", `"box"`} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("verify error does not mention %s:\n%v", s, err)
			}
		}
	})

	t.Run("disk contents", func(t *testing.T) {
		raw := rawDisk(t, r1.Outputs[image.OutputDisk].Path)
		checkDisk(t, raw, "0755", li.InputHash)
	})

	t.Run("boot", func(t *testing.T) {
		ready := boot(t, r1)
		if ready.Kernel != r1.KernelVersion {
			t.Errorf("the guest runs kernel %q, the build says %q", ready.Kernel, r1.KernelVersion)
		}
		if ready.Hostname != "box" {
			t.Errorf("guest host name %q, want the image's name", ready.Hostname)
		}
		if ready.Root != "/dev/vda" || ready.Modules == 0 {
			t.Errorf("root %q, %d modules loaded", ready.Root, ready.Modules)
		}
	})

	t.Run("gondolin", func(t *testing.T) {
		testGondolin(t, w, img, li, cacheA, r1)
	})

	t.Run("mode change", func(t *testing.T) {
		cfg2, lock2 := w.configure(t, specOptions{toolMode: "0700"})
		li2 := lock2.Lookup("box")
		if li2.InputHash == li.InputHash {
			t.Fatal("changing an artifact's mode did not change the input hash")
		}
		r, err := image.Build(ctx, cfg2.Images["box"], li2, w.options(t, cacheA))
		if err != nil {
			t.Fatal(err)
		}
		if r.Cached || r.BuildKey == r1.BuildKey {
			t.Error("a changed recipe was a cache hit")
		}
		if r.Outputs[image.OutputDisk].Digest == r1.Outputs[image.OutputDisk].Digest {
			t.Error("changing an artifact's mode did not change the disk")
		}
		for _, name := range []string{image.OutputKernel, image.OutputInitramfs} {
			if r.Outputs[name].Digest != r1.Outputs[name].Digest {
				t.Errorf("changing an artifact's mode changed the %s", name)
			}
		}
		raw := rawDisk(t, r.Outputs[image.OutputDisk].Path)
		checkDisk(t, raw, "0700", li2.InputHash)
	})
}

// checkResult checks that a result's outputs are where it says, with the
// digests it says, and that the manifest describes them.
func checkResult(t *testing.T, r *image.Result, inputHash string) {
	t.Helper()
	if r.InputHash != inputHash || !strings.HasPrefix(r.BuildKey, "sha256:") || r.BuildKey == inputHash {
		t.Errorf("input hash %s (want %s), build key %s", r.InputHash, inputHash, r.BuildKey)
	}
	if r.KernelVersion == "" || r.DiskSize != 64<<20 {
		t.Errorf("kernel version %q, disk size %d (want the declared 64 MiB)", r.KernelVersion, r.DiskSize)
	}
	m, err := image.ReadManifest(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Image != "box" || m.Platform != "linux/amd64" || m.InputHash != inputHash || m.BuildKey != r.BuildKey ||
		m.KernelVersion != r.KernelVersion || m.Cmdline != "quiet" || m.Epoch != testEpoch {
		t.Errorf("manifest %+v does not describe the build %+v", m, r)
	}
	for _, name := range []string{image.OutputKernel, image.OutputInitramfs, image.OutputDisk, image.OutputAgent} {
		o, ok := r.Outputs[name]
		if !ok {
			t.Errorf("no output %s", name)
			continue
		}
		if filepath.Dir(o.Path) != filepath.Dir(r.Manifest) {
			t.Errorf("output %s at %s is not beside the manifest %s", name, o.Path, r.Manifest)
		}
		if got := sha256File(t, o.Path); got != o.Digest {
			t.Errorf("output %s: file hashes to %s, result says %s", name, got, o.Digest)
		}
		if fi, err := os.Stat(o.Path); err != nil || fi.Size() != o.Size {
			t.Errorf("output %s: size %v (%v), result says %d", name, fi.Size(), err, o.Size)
		}
		if mo := m.Outputs[name]; mo.Digest != o.Digest || mo.Size != o.Size || mo.File != filepath.Base(o.Path) {
			t.Errorf("manifest output %s = %+v, result %+v", name, mo, o)
		}
	}
	if got, want := sha256File(t, r.Outputs[image.OutputAgent].Path), sha256File(t, testAgent(t)); got != want {
		t.Errorf("the agent output is not the agent binary")
	}
	head := readFile(t, r.Outputs[image.OutputDisk].Path)[:4]
	if string(head) != "QFI\xfb" {
		t.Errorf("the disk is not a qcow2 image: starts %q", head)
	}
	if d := r.Digests(); len(d) != 3 || d[image.OutputDisk] != r.Outputs[image.OutputDisk].Digest {
		t.Errorf("Digests() = %v", d)
	}
}

func sameOutputs(a, b *image.Result) bool {
	if len(a.Outputs) != len(b.Outputs) {
		return false
	}
	for k, o := range a.Outputs {
		if b.Outputs[k] != o {
			return false
		}
	}
	return true
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawDisk checks the qcow2 disk with qemu-img and converts it to a raw
// image for debugfs.
func rawDisk(t *testing.T, disk string) string {
	t.Helper()
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("SKIPPING THE DISK CHECKS: qemu-img is not on PATH; install the Debian package qemu-utils to run them")
	}
	if out, err := exec.Command(qemuImg, "check", "-f", "qcow2", disk).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img check: %v\n%s", err, out)
	}
	raw := filepath.Join(t.TempDir(), "disk.raw")
	if out, err := exec.Command(qemuImg, "convert", "-f", "qcow2", "-O", "raw", disk, raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	return raw
}

// inode is what debugfs stat says about a path.
type inode struct {
	ino, typ, mode, uid, gid, links string
	fastLink                        string
}

var (
	statInode = regexp.MustCompile(`Inode: (\d+)\s+Type: (\S+)\s+Mode:\s+(\d+)`)
	statUser  = regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)`)
	statLinks = regexp.MustCompile(`Links: (\d+)`)
	statFast  = regexp.MustCompile(`Fast link dest: "([^"]*)"`)
)

func debugfs(t *testing.T, raw, request string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", request, raw).Output()
	if err != nil {
		t.Fatalf("debugfs -R %q: %v", request, err)
	}
	return string(out)
}

func stat(t *testing.T, raw, path string) inode {
	t.Helper()
	out := debugfs(t, raw, "stat "+path)
	m := statInode.FindStringSubmatch(out)
	u := statUser.FindStringSubmatch(out)
	l := statLinks.FindStringSubmatch(out)
	if m == nil || u == nil || l == nil {
		t.Fatalf("debugfs stat %s:\n%s", path, out)
	}
	in := inode{ino: m[1], typ: m[2], mode: m[3], uid: u[1], gid: u[2], links: l[1]}
	if f := statFast.FindStringSubmatch(out); f != nil {
		in.fastLink = f[1]
	}
	return in
}

// checkDisk reads the root filesystem back and checks every artifact's
// bytes, mode and owner, the user, the file block and the base's links.
func checkDisk(t *testing.T, raw, toolMode, inputHash string) {
	t.Helper()
	if _, err := exec.LookPath("debugfs"); err != nil {
		t.Skip("SKIPPING THE DISK CHECKS: debugfs is not on PATH; install the Debian package e2fsprogs to run them")
	}
	if out, err := exec.Command("e2fsck", "-fn", raw).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn: %v\n%s", err, out)
	}
	files := []struct {
		path, body, mode, uid, gid string
	}{
		{"/usr/local/bin/tool", "#!/bin/sh\necho tool 1.0.0\n", toolMode, "1000", "1000"},
		{"/etc/data.txt", "local data\n", "0640", "0", "0"},
		{"/etc/motd", "sandbox\n", "0600", "0", "0"},
		{"/usr/bin/hello", "hello from the base\n", "0755", "0", "0"},
		{"/etc/os-release", "ID=sbxtest\n", "0644", "0", "0"},
	}
	for _, f := range files {
		in := stat(t, raw, f.path)
		if in.typ != "regular" || in.mode != f.mode || in.uid != f.uid || in.gid != f.gid {
			t.Errorf("%s: %s mode %s owner %s:%s, want regular %s %s:%s", f.path, in.typ, in.mode, in.uid, in.gid, f.mode, f.uid, f.gid)
		}
		if got := debugfs(t, raw, "cat "+f.path); got != f.body {
			t.Errorf("%s holds %q, want %q", f.path, got, f.body)
		}
	}
	passwd := debugfs(t, raw, "cat /etc/passwd")
	if !strings.HasPrefix(passwd, "root:x:0:0:") || !strings.Contains(passwd, "\nagent:x:1000:1000:") {
		t.Errorf("/etc/passwd:\n%s", passwd)
	}
	if group := debugfs(t, raw, "cat /etc/group"); !strings.Contains(group, "\nagent:x:1000:") {
		t.Errorf("/etc/group has no group for the user:\n%s", group)
	}
	if home := stat(t, raw, "/home/agent"); home.typ != "directory" || home.uid != "1000" || home.mode != "0700" {
		t.Errorf("/home/agent: %+v", home)
	}
	if info := debugfs(t, raw, "cat /etc/sbx/image.json"); !strings.Contains(info, inputHash) {
		t.Errorf("/etc/sbx/image.json does not record the input hash %s:\n%s", inputHash, info)
	}
	if hi := stat(t, raw, "/usr/bin/hi"); hi.typ != "symlink" || hi.fastLink != "hello" {
		t.Errorf("/usr/bin/hi: %+v, want a symbolic link to hello", hi)
	}
	a, b := stat(t, raw, "/usr/bin/hello"), stat(t, raw, "/usr/bin/hello-again")
	if a.ino != b.ino || a.links != "2" {
		t.Errorf("hello (inode %s, %s links) and hello-again (inode %s) are not one hard-linked file", a.ino, a.links, b.ino)
	}
	if out := debugfs(t, raw, "ls -l /var/lib"); strings.Contains(out, "old") {
		t.Errorf("the upper layer's whiteout did not remove /var/lib/old:\n%s", out)
	}
}

// boot starts the build under QEMU with TCG on a copy-on-write overlay of
// its disk and returns the agent's ready line.
func boot(t *testing.T, r *image.Result) bootproto.Ready {
	t.Helper()
	qemu := qemutest.Require(t)
	overlay := filepath.Join(t.TempDir(), "root.qcow2")
	if err := qcow2.CreateOverlay(overlay, r.Outputs[image.OutputDisk].Path, "qcow2", 0); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"-machine", "q35", "-accel", "tcg", "-cpu", "qemu64", "-m", "512", "-smp", "1",
		"-nodefaults", "-no-reboot", "-display", "none", "-serial", "stdio",
		"-kernel", r.Outputs[image.OutputKernel].Path, "-initrd", r.Outputs[image.OutputInitramfs].Path,
		"-append", "console=ttyS0 panic=-1 quiet",
		"-drive", "file=" + overlay + ",if=none,id=d0,format=qcow2", "-device", "virtio-blk-pci,drive=d0",
	}
	const timeout = 150 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("QEMU (TCG) ran %v", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("QEMU did not exit within %v; console:\n%s", timeout, out.String())
	}
	if err != nil {
		t.Fatalf("QEMU: %v; console:\n%s", err, out.String())
	}
	if msg, bad := bootproto.ParseError(out.Bytes()); bad {
		t.Fatalf("the agent reported an error: %s; console:\n%s", msg, out.String())
	}
	ready, ok, err := bootproto.ParseReady(out.Bytes())
	if err != nil || !ok {
		t.Fatalf("no ready line (%v); console:\n%s", err, out.String())
	}
	return ready
}

// lockWithOutputs returns a copy of li recording outputs.
func lockWithOutputs(li *lockfiles.Image, outputs map[string]string) *lockfiles.Image {
	c := *li
	c.Outputs = outputs
	return &c
}
