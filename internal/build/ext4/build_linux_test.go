package ext4

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestKernelMount mounts the image read-write with the running kernel,
// checks every entry through the VFS, writes to it and checks it again.
// It needs root and loop devices.
func TestKernelMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	entries := everything()
	opts := testOptions()
	opts.JournalBlocks = 1024
	img, _ := buildFile(t, makeTar(t, entries), opts)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop,rw", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("loop mount unavailable here: %v: %s", err, out)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Errorf("umount: %v: %s", err, out)
			}
			mounted = false
		}
	}
	defer unmount()

	for p, w := range expected(entries) {
		full := filepath.Join(mnt, p)
		fi, err := os.Lstat(full)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int64(st.Mode&0o7777) != w.mode || int64(st.Uid) != w.uid || int64(st.Gid) != w.gid {
			t.Errorf("%s: mode %o uid %d gid %d, want %o %d %d", p, st.Mode&0o7777, st.Uid, st.Gid, w.mode, w.uid, w.gid)
		}
		if !fi.ModTime().Equal(w.mtime) {
			t.Errorf("%s: mtime %v, want %v", p, fi.ModTime(), w.mtime)
		}
		switch w.typ {
		case "regular":
			if got, err := os.ReadFile(full); err != nil || !bytes.Equal(got, w.body) || int64(st.Nlink) != w.links {
				t.Errorf("%s: %d bytes (%v), %d links; want %d bytes, %d links", p, len(got), err, st.Nlink, len(w.body), w.links)
			}
		case "symlink":
			if got, err := os.Readlink(full); err != nil || got != w.target {
				t.Errorf("%s: readlink %q (%v), want %q", p, got, err, w.target)
			}
		case "character special", "block special":
			if maj, min := int64(st.Rdev>>8&0xfff), int64(st.Rdev&0xff|st.Rdev>>12&0xfff00); maj != w.major || min != w.minor {
				t.Errorf("%s: device %d:%d, want %d:%d", p, maj, min, w.major, w.minor)
			}
		}
	}
	for _, c := range []struct{ path, name, value string }{
		{"xattr/small", "user.note", "hi"},
		{"xattr/large", "user.big", strings.Repeat("0123456789", 200)},
		{"xattr/acl", "system.posix_acl_access", string(acl())},
	} {
		buf := make([]byte, 4096)
		n, err := syscall.Getxattr(filepath.Join(mnt, c.path), c.name, buf)
		if err != nil || string(buf[:n]) != c.value {
			t.Errorf("getxattr %s %s = %q (%v), want %q", c.path, c.name, buf[:max(n, 0)], err, c.value)
		}
	}

	// Write: a file, a directory with many entries, a rename and a delete.
	if err := os.WriteFile(filepath.Join(mnt, "etc/hostname"), []byte("sandbox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(mnt, "work", fmt.Sprintf("f%d", i)), randomBytes(uint64(i), 10000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(mnt, "bin/busybox"), filepath.Join(mnt, "bin/bb")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "home/agent/big.bin")); err != nil {
		t.Fatal(err)
	}
	unmount()
	fsck(t, img)
	if got := catFile(t, img, "/etc/hostname"); string(got) != "sandbox\n" {
		t.Errorf("/etc/hostname after unmount = %q", got)
	}
}

// TestTimesOutsideInt32 checks times before 1970 and after 2038, which
// need ext4's extra epoch bits, as debugfs decodes them.
