package rootfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/ctxio/ctxiotest"
)

// e2fsprogs returns the paths of e2fsck and debugfs, skipping the test
// (loudly) when they are not installed.
func e2fsprogs(t *testing.T) (fsck, debugfs string) {
	t.Helper()
	var err error
	for _, p := range []struct {
		name string
		dst  *string
	}{{"e2fsck", &fsck}, {"debugfs", &debugfs}} {
		if *p.dst, err = exec.LookPath(p.name); err != nil {
			if *p.dst, err = exec.LookPath("/usr/sbin/" + p.name); err != nil {
				t.Skipf("SKIPPED: %s is not installed (e2fsprogs); the disk image cannot be checked", p.name)
			}
		}
	}
	return fsck, debugfs
}

// TestBuildDisk assembles the agent image, writes it as ext4, has e2fsck
// check it and reads files back with debugfs.
func TestBuildDisk(t *testing.T) {
	fsck, debugfs := e2fsprogs(t)
	tree, err := Assemble(context.Background(), loadImage(t, agentSpec()), agentInputs(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	img := filepath.Join(t.TempDir(), "rootfs.ext4")
	opts := ext4.Options{Size: 32 << 20, Label: "sbx-root", Seed: []byte("agent"), Epoch: 1700000000}
	stats, err := BuildDisk(context.Background(), tree, img, opts)
	if err != nil {
		t.Fatal(err)
	}
	if stats.HardLinks < 2 || stats.Symlinks < 3 {
		t.Errorf("stats %+v: want the base's and the app's hard links and symbolic links", stats)
	}
	if out, err := exec.Command(fsck, "-fn", img).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn: %v\n%s", err, out)
	}

	stat := func(p string) string {
		out, err := exec.Command(debugfs, "-R", "stat "+p, img).CombinedOutput()
		if err != nil {
			t.Fatalf("debugfs stat %s: %v\n%s", p, err, out)
		}
		return string(out)
	}
	owner := regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)`)
	mode := regexp.MustCompile(`Mode:\s+(\d+)`)
	for _, c := range []struct {
		path, mode, uid, gid string
	}{
		{"/usr/local/bin/tool", "0750", "0", "10"},
		{"/usr/local/bin/claude", "0755", "0", "0"},
		{"/opt/app/bin/helper", "04755", "0", "0"},
		{"/opt/app/bin/app", "0750", "1000", "1000"},
		{"/home/agent", "0700", "501", "501"},
		{"/etc/shadow", "0640", "0", "42"},
		{"/tmp", "01777", "0", "0"},
	} {
		out := stat(c.path)
		m, o := mode.FindStringSubmatch(out), owner.FindStringSubmatch(out)
		if m == nil || o == nil {
			t.Errorf("debugfs stat %s: no mode or owner in\n%s", c.path, out)
			continue
		}
		if m[1] != c.mode || o[1] != c.uid || o[2] != c.gid {
			t.Errorf("%s: mode %s owner %s:%s, want %s %s:%s", c.path, m[1], o[1], o[2], c.mode, c.uid, c.gid)
		}
	}
	if out := stat("/opt/app/bin/app-hard"); !strings.Contains(out, "Links: 2") {
		t.Errorf("/opt/app/bin/app-hard is not a second link to one inode:\n%s", out)
	}

	cat := func(p string) string {
		out, err := exec.Command(debugfs, "-R", "cat "+p, img).Output()
		if err != nil {
			t.Fatalf("debugfs cat %s: %v", p, err)
		}
		return string(out)
	}
	if got := cat("/usr/local/bin/tool"); got != rawTool {
		t.Errorf("/usr/local/bin/tool reads back %q", got)
	}
	if got := cat("/etc/hostname"); got != "agent\n" {
		t.Errorf("/etc/hostname reads back %q", got)
	}

	// The same tree written again gives the same disk.
	img2 := filepath.Join(t.TempDir(), "rootfs.ext4")
	if _, err := BuildDisk(context.Background(), tree, img2, opts); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(img)
	b, _ := os.ReadFile(img2)
	if !bytes.Equal(a, b) {
		t.Error("two disks built from one tree differ")
	}
}

// TestBuildDiskTooSmall leaves nothing behind when the tree does not fit.
func TestBuildDiskTooSmall(t *testing.T) {
	tree, err := Assemble(context.Background(), loadImage(t, agentSpec()), agentInputs(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	dir := t.TempDir()
	_, err = BuildDisk(context.Background(), tree, filepath.Join(dir, "rootfs.ext4"), ext4.Options{Size: 64 << 10, Seed: []byte("x")})
	if err == nil {
		t.Fatal("a 64 KiB disk held the image")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a failed build left %d files behind", len(ents))
	}
}

// TestBuildDiskCancelled is Ctrl-C in the middle of writing the disk:
// BuildDisk returns the context's error and leaves no disk and no
// temporary file, and an earlier disk at the path stays as it was.
func TestBuildDiskCancelled(t *testing.T) {
	tree, err := Assemble(context.Background(), loadImage(t, agentSpec()), agentInputs(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	opts := ext4.Options{Size: 32 << 20, Label: "sbx-root", Seed: []byte("agent"), Epoch: 1700000000, JournalBlocks: 1024}
	dir := t.TempDir()
	img := filepath.Join(dir, "rootfs.ext4")
	whole := ctxiotest.CancelAt(0)
	defer whole.Stop()
	if _, err := BuildDisk(whole, tree, img, opts); err != nil {
		t.Fatal(err)
	}
	if whole.Calls() < 4 {
		t.Fatalf("a whole build consulted its context %d times; too few to cancel in the middle", whole.Calls())
	}
	if err := os.Remove(img); err != nil {
		t.Fatal(err)
	}
	for _, earlier := range []bool{false, true} {
		if earlier {
			if err := os.WriteFile(img, []byte("earlier disk"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx := ctxiotest.CancelAt(whole.Calls() / 2)
		_, err := BuildDisk(ctx, tree, img, opts)
		ctx.Stop()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("BuildDisk cancelled halfway = %v, want context.Canceled", err)
		}
		ents, _ := os.ReadDir(dir)
		b, rerr := os.ReadFile(img)
		switch {
		case !earlier && len(ents) != 0:
			t.Errorf("the cancelled build left %v", ents)
		case earlier && (len(ents) != 1 || rerr != nil || string(b) != "earlier disk"):
			t.Errorf("the cancelled build left %v; the earlier disk reads %q, %v", ents, b, rerr)
		}
	}
}
