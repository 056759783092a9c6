package e2etest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
)

// modesScript is what each guest user runs in its own directory $D of
// the mount: directories made 0777, set-group-ID and sticky, a script
// made executable, a key made 0600, a file created 0777 with umask 0, a
// tool installed 4755, chmod u+s and 0777; it prints the mode each one
// shows ("mode NAME BITS") and what test(1) says.
const modesScript = `set -e
cd /workspace
T=/tmp/modetool.$$
cp tools/modetool $T
chmod 0755 $T
echo "mode notes.txt $(stat -c %a notes.txt)"
mkdir -m 0777 $D
mkdir -m 2777 $D/sgid
mkdir -m 1777 $D/sticky
cp src/run.sh $D/run.sh
chmod +x $D/run.sh
test -x $D/run.sh && echo "test -x run.sh"
$D/run.sh
chmod u+s $D/run.sh
echo key > $D/key
chmod 0600 $D/key
test -r $D/key && test -w $D/key && ! test -x $D/key && echo "test key"
$T create 0777 $D/made
$T install 4755 src/run.sh $D/tool
test -x $D/tool && echo "test -x tool"
echo f > $D/f
chmod 0777 $D/f
test -k $D/sticky && echo "test -k sticky"
for p in $D $D/sgid $D/sticky $D/run.sh $D/key $D/made $D/tool $D/f; do
	echo "mode $p $(stat -c %a $p)"
done
echo done
`

// chmodAllScript chmods the whole mount 0777 and prints the modes of
// the root, .git and the host's files.
const chmodAllScript = `set -e
cd /workspace
if chmod -R 0777 /workspace 2>/tmp/chmod.$$; then echo "chmod -R ok"; fi
sed 's/^/chmod-err /' /tmp/chmod.$$
for p in . .git .git/hooks .git/hooks/pre-commit src/main.go notes.txt; do
	echo "mode $p $(stat -c %a $p)"
done
test -x src/main.go && echo "test -x main.go"
echo done
`

// TestGuestModesInVM boots the busybox image with a read-write workspace
// mount and, as the sandbox's user and as root, makes and chmods files
// and directories with modes that would open the host's tree to other
// local users (modesScript, with chmod -R 0777 of the whole mount). In
// the guest each mode shows as set (less set-user-ID and set-group-ID
// bits, which the 9P library drops) and test(1) agrees; on the host no
// entry under the workspace is group- or other-writable, set-ID or
// sticky, the root keeps its mode, and the owner's bits did arrive (the
// executable script is executable, the key 0600).
func TestGuestModesInVM(t *testing.T) {
	cfgDir := vmConfigDir(t, "testdata/vfsmodes/sbx.hcl", "kernel.deb", "busybox.deb")
	work := filepath.Join(cfgDir, "work")
	for name, f := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"README.md":             {"hello from the host\n", 0o644},
		"notes.txt":             {"the host's own mode\n", 0o640},
		"src/main.go":           {"package main\n", 0o644},
		"src/run.sh":            {"#!/bin/sh\necho ran from the mount\n", 0o644},
		".git/HEAD":             {"ref: refs/heads/main\n", 0o644},
		".git/config":           {"[core]\n\tfilemode = true\n", 0o644},
		".git/hooks/pre-commit": {"#!/bin/sh\nexit 0\n", 0o755},
		"scratch/.keep":         {"", 0o644},
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	buildGuestTool(t, "./testdata/vfsmodes/modetool", filepath.Join(work, "tools/modetool"))
	rootInfo, err := os.Lstat(work)
	if err != nil {
		t.Fatal(err)
	}
	// Every host entry's mode now: none is group- or other-writable,
	// set-ID or sticky, so any such bit found later came from the guest.
	weakBits := os.FileMode(0o022) | os.ModeSetuid | os.ModeSetgid | os.ModeSticky
	checkHost := func(when string) {
		t.Helper()
		err := filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Mode()&os.ModeSymlink == 0 && info.Mode()&weakBits != 0 {
				rel, _ := filepath.Rel(work, p)
				t.Errorf("%s: the host's %s has mode %v", when, rel, info.Mode())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	checkHost("before the guest")

	ctx, sb := startVM(t, cfgDir, "modes", 20*time.Minute)

	// run runs script as user in the guest and returns the modes it
	// printed.
	run := func(t *testing.T, user, script string) (string, map[string]string) {
		t.Helper()
		// The sandbox's user is the default; "root" asks for root.
		asUser := user
		if user == "agent" {
			asUser = ""
		}
		got, code, err := guestExec(ctx, sb, 3*time.Minute, sbx.Cmd{Args: []string{"sh", "-c", script}, Env: []string{"D=" + user},
			User: asUser, Dir: "/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("as %s (exit %d):\n%s", user, code, got)
		if code != 0 || !strings.HasSuffix(got, "done\n") {
			t.Fatalf("the script failed as %s (exit %d)", user, code)
		}
		modes := map[string]string{}
		for _, l := range strings.Split(got, "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "mode" {
				modes[f[1]] = f[2]
			}
		}
		return got, modes
	}
	for _, user := range []string{"agent", "root"} {
		t.Run(user, func(t *testing.T) {
			got, modes := run(t, user, modesScript)
			want := map[string]string{
				// A file the guest did not chmod shows the host's mode
				// (root comes after the sandbox's user's chmod -R).
				"notes.txt": map[string]string{"agent": "640", "root": "777"}[user],
				user:        "777",
				// mkdir never sets set-group-ID from its mode, and the
				// 9P library drops it from chmod: the rest shows.
				user + "/sgid":   "777",
				user + "/sticky": "1777",
				user + "/run.sh": "755",
				user + "/key":    "600",
				user + "/made":   "777",
				user + "/tool":   "755",
				user + "/f":      "777",
			}
			for p, w := range want {
				if modes[p] != w {
					t.Errorf("as %s the guest sees %s as %q; want %s", user, p, modes[p], w)
				}
			}
			for _, line := range []string{"test -x run.sh", "ran from the mount", "test key", "test -x tool", "test -k sticky"} {
				if !strings.Contains(got, line+"\n") {
					t.Errorf("as %s: no %q", user, line)
				}
			}
			checkHost("after the guest's chmods as " + user)
			for rel, want := range map[string]os.FileMode{user + "/key": 0o600, user + "/run.sh": 0o100, user + "/tool": 0o100} {
				info, err := os.Lstat(filepath.Join(work, rel))
				if err != nil {
					t.Errorf("host %s: %v", rel, err)
					continue
				}
				if rel == user+"/key" && info.Mode().Perm() != want || rel != user+"/key" && info.Mode()&want == 0 {
					t.Errorf("the host's %s has mode %v (want %v)", rel, info.Mode(), want)
				}
			}

			got, modes = run(t, user, chmodAllScript)
			for _, l := range strings.Split(got, "\n") {
				if rest, ok := strings.CutPrefix(l, "chmod-err "); ok && !strings.Contains(rest, "/workspace/tools") {
					t.Errorf("chmod -R failed outside the read-only tools/: %s", rest)
				}
			}
			for _, p := range []string{".", ".git", ".git/hooks", ".git/hooks/pre-commit", "src/main.go", "notes.txt"} {
				if modes[p] != "777" {
					t.Errorf("as %s after chmod -R 0777 the guest sees %s as %q; want 777", user, p, modes[p])
				}
			}
			if !strings.Contains(got, "test -x main.go\n") {
				t.Errorf("as %s: test -x src/main.go failed after chmod -R 0777", user)
			}
			checkHost("after the guest's chmod -R 0777 as " + user)
		})
	}
	if info, err := os.Lstat(work); err != nil || info.Mode() != rootInfo.Mode() {
		t.Errorf("the workspace root's host mode is %v, %v; it was %v", info.Mode(), err, rootInfo.Mode())
	}
}
