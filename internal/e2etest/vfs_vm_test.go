package e2etest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
)

// The host tree's secrets: none may reach the guest.
const (
	vfsEnvSecret = "TOKEN=sk-vfs-host-only-7d1e"
	vfsGitSecret = "https://x:ghp-vfs-host-only-93ab@git.test/repo.git"
	vfsPEM       = "-----BEGIN PRIVATE KEY----- vfs-host-only"
)

// treeHash sums every name, type, mode, size, modification time, link
// target and content under root, without following links.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%q %v %d %d", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%x (%d entries)", sum[:8], len(lines))
}

// TestWorkspaceMountInVM boots, through the Go API, an image with
// Debian's git and a read-write workspace mount with hide, read-only and
// tmpfs rules, and checks from inside the guest: git works on the mount
// as the non-root user and the host sees its commits; the hidden files
// are out of reach of cat, ls, find, hard links, planted symlinks and
// ".." walks; every write to a read-only path fails and the host tree is
// byte-for-byte unchanged; 1000 files made and removed in the tmpfs path
// never reach the host; names with a newline or invalid UTF-8 arrive on
// the host exactly; a path longer than PATH_MAX is an errno. Last, root
// unmounts the mount and speaks 9P2000.L itself on its port
// (testdata/vfs/raw9p) and still reads nothing hidden or outside.
func TestWorkspaceMountInVM(t *testing.T) { workspaceMountInVM(t, "") }

// TestWorkspaceMount9PInVM is TestWorkspaceMountInVM with the mount over
// 9P, the transport of hosts where virtio-fs cannot run: its raw9p
// subtest runs, rawvirtiofs skips.
func TestWorkspaceMount9PInVM(t *testing.T) { workspaceMountInVM(t, "9p") }

// workspaceMountInVM is TestWorkspaceMountInVM over asked ("" chooses).
func workspaceMountInVM(t *testing.T, asked string) {
	requireDebianGit(t)
	cfgDir := vmConfigDir(t, "testdata/vfs/sbx.hcl", "kernel.deb")

	// The host's worktree: a git repository whose .git/config holds a
	// credential, an .env, a key, a read-only vendor tree and the raw 9P
	// program in a read-only path.
	work := filepath.Join(cfgDir, "work")
	for name, content := range map[string]string{
		"README.md":         "hello from the host\n",
		".env":              vfsEnvSecret + "\n",
		"keys/deploy.pem":   vfsPEM + "\n",
		"src/main.go":       "package main\n",
		"src/deep/cert.pem": vfsPEM + "\n",
		"vendor/lib.go":     "package lib\n",
		"scratch/.keep":     "",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(work, "vendor/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostGit(t, work, "init", "-q", "-b", "main")
	hostGit(t, work, "config", "remote.origin.url", vfsGitSecret)
	hostGit(t, work, "add", "README.md", "src/main.go", "vendor/lib.go")
	hostGit(t, work, "commit", "-q", "-m", "from the host")
	gitConfig, err := os.ReadFile(filepath.Join(work, ".git/config"))
	if err != nil || !strings.Contains(string(gitConfig), "ghp-vfs-host-only") {
		t.Fatalf("host .git/config: %q, %v", gitConfig, err)
	}
	buildGuestTool(t, "./testdata/vfs/raw9p", filepath.Join(work, "tools/raw9p"))
	buildGuestTool(t, "./testdata/vfs/rawvirtiofs", filepath.Join(work, "tools/rawvirtiofs"))

	ctx, sb := startVMWith(t, cfgDir, "dev", 20*time.Minute, sbx.StartOptions{MountTransport: asked})

	var guestOut strings.Builder
	run := func(user, script string) (string, int) {
		t.Helper()
		out, code, err := guestExec(ctx, sb, 3*time.Minute, sbx.Cmd{Args: []string{"sh", "-c", script}, User: user, Dir: "/workspace"})
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		guestOut.WriteString(out)
		return out, code
	}
	// How the mount reaches the guest, as the guest's file system type
	// of /workspace: 9p or virtiofs. The raw subtests speak the one it
	// is (and unmount it).
	var transport string
	if out, _ := run("", "grep ' /workspace ' /proc/mounts"); len(strings.Fields(out)) >= 3 {
		transport = strings.Fields(out)[2]
	} else {
		t.Fatalf("/workspace is not mounted: %q", out)
	}
	t.Logf("the mount is of type %s", transport)
	if want := cmp.Or(asked, "virtiofs"); transport != want {
		t.Errorf("the mount is of type %s; want %s", transport, want)
	}
	// try runs one command and prints "NAME ok" or "NAME err MESSAGE".
	const try = `try() { n=$1; shift; if "$@" 2>/tmp/err.$$; then echo "$n ok"; else echo "$n err $(head -c 100 /tmp/err.$$ | tr '\n' ' ')"; fi; }
`

	t.Run("git", func(t *testing.T) {
		out, code := run("", `set -e
id -un
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@test.invalid GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@test.invalid
git status --short
echo 'package main // from the guest' > src/main.go
echo new > src/new.txt
git add src/main.go src/new.txt
git commit -q -m 'from the guest'
git status --porcelain
echo status-done
# A repository made in the guest: not in the host's work tree, where a
# .git is refused (git on the host would enter it through a gitlink),
# but in the tmpfs path.
if git init -q nested 2>/dev/null; then echo nested-on-host; fi
mkdir scratch/nested && cd scratch/nested
git init -q -b main
echo nested > n.txt
git add n.txt
git commit -q -m 'nested from the guest'
git status --porcelain
git log --format=%s
`)
		if code != 0 {
			t.Fatalf("git in the guest: exit %d\n%s", code, out)
		}
		if !strings.HasPrefix(out, "agent\n") || !strings.Contains(out, "status-done") || !strings.HasSuffix(out, "nested from the guest\n") {
			t.Errorf("git in the guest:\n%s", out)
		}
		if got := hostGit(t, work, "log", "--format=%s"); got != "from the guest\nfrom the host" {
			t.Errorf("host git log: %q", got)
		}
		if got := hostGit(t, work, "show", "HEAD:src/new.txt"); got != "new" {
			t.Errorf("host git show: %q", got)
		}
		if strings.Contains(out, "nested-on-host") {
			t.Errorf("the guest made a repository inside the host's work tree")
		}
		if _, err := os.Lstat(filepath.Join(work, "nested/.git")); err == nil {
			t.Errorf("the guest's nested repository reached the host")
		}
		run("", "rm -rf scratch/nested")
		if b, _ := os.ReadFile(filepath.Join(work, ".git/config")); !bytes.Equal(b, gitConfig) {
			t.Errorf("the hidden .git/config changed on the host:\n%s", b)
		}
		// git init at the mount's root would have to write the hidden
		// .git/config: it must fail, not reach the host's.
		out, _ = run("", "git init -q . 2>&1; echo rc=$?")
		t.Logf("git init over the hidden .git/config: %s", strings.TrimSpace(out))
		if b, _ := os.ReadFile(filepath.Join(work, ".git/config")); !bytes.Equal(b, gitConfig) {
			t.Errorf("git init in the guest rewrote the hidden .git/config on the host:\n%s", b)
		}
	})

	t.Run("hidden", func(t *testing.T) {
		for _, user := range []string{"", "root"} {
			out, _ := run(user, try+`
try cat-env cat .env
try cat-gitconfig cat .git/config
try cat-pem cat keys/deploy.pem
try cat-deep-pem cat src/deep/cert.pem
try ls-env ls -l .env
try ls-gitconfig ls -l .git/config
echo "ls: $(ls -aR . | tr '\n' ' ')"
echo "lsgit: $(ls -a .git | tr '\n' ' ')"
echo "find: $(find /workspace | tr '\n' ' ')"
try dotdot-env cat src/../.env
try dotdot-walk cat /workspace/src/deep/../../.git/config
try dotdot-up cat ../workspace/.env
try hardlink-env ln .env src/h1
try hardlink-pem ln keys/deploy.pem src/h2
try hardlink-gitconfig ln .git/config src/h3
mkdir -p planted
ln -sf ../.env planted/s-env
ln -sf /workspace/.git/config planted/s-gitconfig
ln -sf ../keys/deploy.pem planted/s-pem
ln -sf ../../../../../etc/hostname planted/s-up
try sym-env cat planted/s-env
try sym-gitconfig cat planted/s-gitconfig
try sym-pem cat planted/s-pem
try create-env sh -c 'echo x > .env'
try create-pem sh -c 'echo x > src/new.pem'
try rename-onto-env mv README.md .env
try mkdir-pem mkdir x.pem
`)
			for _, probe := range []string{"cat-env", "cat-gitconfig", "cat-pem", "cat-deep-pem", "ls-env", "ls-gitconfig",
				"dotdot-env", "dotdot-walk", "dotdot-up", "hardlink-env", "hardlink-pem", "hardlink-gitconfig",
				"sym-env", "sym-gitconfig", "sym-pem", "create-env", "create-pem", "rename-onto-env", "mkdir-pem"} {
				if !strings.Contains(out, "\n"+probe+" err ") && !strings.HasPrefix(out, probe+" err ") {
					t.Errorf("as %q: %s was not refused:\n%s", user, probe, out)
				}
			}
			for _, l := range strings.Split(out, "\n") {
				var leaks []string
				switch {
				case strings.HasPrefix(l, "ls:"):
					leaks = []string{" .env ", ".pem "}
				case strings.HasPrefix(l, "lsgit:"):
					leaks = []string{" config "}
				case strings.HasPrefix(l, "find:"):
					leaks = []string{"/workspace/.env ", "/workspace/.git/config ", ".pem "}
				}
				for _, leak := range leaks {
					if strings.Contains(l+" ", leak) {
						t.Errorf("as %q: %q listed: %s", user, leak, l)
					}
				}
			}
			if strings.Contains(out, "vfs-host-only") {
				t.Errorf("as %q: a secret reached the guest:\n%s", user, out)
			}
			if !strings.Contains(out, "find: /workspace ") || !strings.Contains(out, "README.md") {
				t.Errorf("as %q: the listings are empty:\n%s", user, out)
			}
		}
		if target, err := os.Readlink(filepath.Join(work, "planted/s-up")); err != nil || target != "../../../../../etc/hostname" {
			t.Errorf("the planted link on the host: %q, %v (stored as a link, never followed)", target, err)
		}
		for name, want := range map[string]string{".env": vfsEnvSecret + "\n", "keys/deploy.pem": vfsPEM + "\n", "README.md": "hello from the host\n"} {
			if b, err := os.ReadFile(filepath.Join(work, name)); err != nil || string(b) != want {
				t.Errorf("host %s: %q, %v", name, b, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(work, "src/new.pem")); err == nil {
			t.Errorf("a hidden name was created on the host")
		}
	})

	t.Run("readonly", func(t *testing.T) {
		before := treeHash(t, work)
		for _, user := range []string{"", "root"} {
			probes := []string{"write", "append", "create", "touch", "rm", "mv-within", "mv-out", "mv-in", "chmod",
				"ln-within", "ln-out", "symlink", "truncate", "mkdir", "rmdir", "dd"}
			out, _ := run(user, try+`
try write sh -c 'echo x > vendor/lib.go'
try append sh -c 'echo x >> vendor/lib.go'
try create sh -c 'echo x > vendor/new.go'
try touch touch vendor/lib.go
try rm rm -f vendor/lib.go
try mv-within mv vendor/lib.go vendor/moved.go
try mv-out mv vendor/lib.go src/moved.go
try mv-in mv README.md vendor/README.md
try chmod chmod 600 vendor/lib.go
try ln-within ln vendor/lib.go vendor/hard.go
try ln-out ln vendor/lib.go src/hard.go
try symlink ln -s lib.go vendor/sym.go
try truncate truncate -s 0 vendor/lib.go
try mkdir mkdir vendor/dir
try rmdir rmdir vendor/empty
try dd dd if=/dev/zero of=vendor/lib.go bs=1 count=1 conv=notrunc
`)
			for _, p := range probes {
				if !strings.Contains("\n"+out, "\n"+p+" err ") {
					t.Errorf("as %q: %s on a read-only path was not refused:\n%s", user, p, out)
				}
			}
		}
		if after := treeHash(t, work); after != before {
			t.Errorf("the host tree changed: %s, then %s", before, after)
		}
	})

	t.Run("tmpfs", func(t *testing.T) {
		before := treeHash(t, work)
		out, code := run("", `set -e
ls -A scratch | wc -l
i=0; while [ $i -lt 1000 ]; do echo "file $i" > scratch/f$i; i=$((i+1)); done
ls scratch | wc -l
cat scratch/f999
rm scratch/f*
ls -A scratch | wc -l
`)
		if code != 0 || strings.Fields(out)[0] != "0" || !strings.Contains(out, "\n1000\nfile 999\n0\n") {
			t.Errorf("the tmpfs path: exit %d\n%s", code, out)
		}
		if after := treeHash(t, work); after != before {
			t.Errorf("the host tree changed: %s, then %s", before, after)
		}
		if ents, _ := os.ReadDir(filepath.Join(work, "scratch")); len(ents) != 1 || ents[0].Name() != ".keep" {
			t.Errorf("the host's scratch: %v", ents)
		}
	})

	t.Run("names", func(t *testing.T) {
		out, code := run("", `set -e
touch "$(printf 'new\nline')" "$(printf 'bad\377\376utf8')" "$(printf 'tab\there')"
mkdir "$(printf 'dir\nwith\nlines')"
echo inside > "$(printf 'dir\nwith\nlines')/f"
echo made
`)
		if code != 0 || !strings.HasSuffix(out, "made\n") {
			t.Fatalf("names in the guest: exit %d\n%s", code, out)
		}
		for _, name := range []string{"new\nline", "bad\xff\xfeutf8", "tab\there", "dir\nwith\nlines/f"} {
			if _, err := os.Lstat(filepath.Join(work, name)); err != nil {
				t.Errorf("the guest's name %q on the host: %v", name, err)
			}
		}
		// A path longer than PATH_MAX: directories of 200-byte names,
		// made one below the other from the guest, until something says
		// no; then the mount still serves.
		out, _ = run("", `seg=$(printf '%0200d' 0)
cd /workspace && mkdir long && cd long
i=0; while [ $i -lt 30 ]; do
  if ! mkdir $seg 2>/tmp/err; then echo "mkdir failed at depth $i: $(cat /tmp/err)"; break; fi
  if ! cd $seg 2>/tmp/err; then echo "cd failed at depth $i: $(cat /tmp/err)"; break; fi
  i=$((i+1))
done
echo "depth $i"
if echo x > f 2>/tmp/err; then echo "file ok at depth $i"; else echo "file failed: $(cat /tmp/err)"; fi
cat /workspace/README.md`)
		t.Logf("past PATH_MAX: %s", out)
		if !strings.Contains(out, "too long") {
			t.Errorf("no ENAMETOOLONG past PATH_MAX:\n%s", out)
		}
		if !strings.HasSuffix(out, "hello from the host\n") {
			t.Errorf("the mount stopped serving after a path past PATH_MAX:\n%s", out)
		}
	})

	t.Run("raw9p", func(t *testing.T) {
		if transport != "9p" {
			t.Skipf("the mount reaches the guest over %s, not 9P: there is no 9P port to speak to", transport)
		}
		hostname, _ := os.ReadFile("/etc/hostname")
		out, code := run("root", `set -e
cd /
cp /workspace/tools/raw9p /tmp/raw9p
# No udev in the guest: the port's device is found by its name in sysfs,
# as the agent finds it.
port=
for d in /sys/class/virtio-ports/*; do
  if [ "$(cat $d/name)" = sbx.vfs.0 ]; then port=/dev/${d##*/}; fi
done
echo "port $port"
test -c "$port"
umount /workspace
echo unmounted
/tmp/raw9p $port`)
		t.Logf("raw 9P from the guest as root (exit %d):\n%s", code, out)
		if !strings.Contains(out, "attach ok") || !strings.Contains(out, "control ok \"hello from the host\\n\"") || !strings.HasSuffix(out, "done\n") {
			t.Fatalf("the raw client did not get through (exit %d):\n%s", code, out)
		}
		for _, p := range []string{"env", "gitconfig", "pem", "slashname", "dotdot", "dotdot-inside", "dotdot-hostname", "dot", "empty",
			"via-l-env", "via-l-etc", "via-l-up", "via-l-git", "via-l-root", "through-l-git", "through-l-root", "link-onto-hidden"} {
			if !strings.Contains(out, "\n"+p+" err ") {
				t.Errorf("raw probe %s was not refused", p)
			}
		}
		if strings.Contains(out, "vfs-host-only") || len(bytes.TrimSpace(hostname)) > 0 && strings.Contains(out, string(bytes.TrimSpace(hostname))+`\n"`) {
			t.Errorf("the raw client read a hidden or outside file")
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "readdir ") && (strings.Contains(l, ".env") || strings.Contains(l, "README.md") == false) {
				t.Errorf("raw listing: %s", l)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(work, ".env")); string(b) != vfsEnvSecret+"\n" {
			t.Errorf("host .env: %q", b)
		}
	})

	t.Run("rawvirtiofs", func(t *testing.T) {
		if transport != "virtiofs" {
			t.Skipf("the mount reaches the guest over %s, not virtio-fs: there is no virtio-fs device to drive", transport)
		}
		hostname, _ := os.ReadFile("/etc/hostname")
		readOnlyBefore := treeHash(t, filepath.Join(work, "vendor")) + treeHash(t, filepath.Join(work, "tools"))
		// The tool finds the device in sysfs by its IDs and unbinds it
		// from its driver; afterwards it is bound again the same way.
		out, code, err := guestExec(ctx, sb, 8*time.Minute, sbx.Cmd{Args: []string{"sh", "-c", `set -e
cd /
cp /workspace/tools/rawvirtiofs /tmp/rawvirtiofs
umount /workspace
echo unmounted
/tmp/rawvirtiofs`}, User: "root", Dir: "/"})
		guestOut.WriteString(out)
		t.Logf("virtio-fs driven from the guest as root (exit %d, %v):\n%s", code, err, out)
		if err != nil || !strings.Contains(out, "\ninit ok ") || !strings.Contains(out, "\ncontrol ok \"hello from the host\\n\"") || !strings.HasSuffix(out, "\ndone\n") {
			t.Fatalf("the raw driver did not get through (exit %d, %v)", code, err)
		}
		refused := []string{
			"forged-getattr", "forged-lookup", "forged-open", "forged-opendir", "forged-readlink",
			"forged-read", "forged-readdir", "forged-write", "forged-release", "forged-fsync",
			"env", "gitconfig", "pem", "deep-pem", "dotdot", "dotdot-passwd", "dotdot-inside", "dot", "empty",
			"slashname", "slash-up", "slash-abs", "longname", "longname-256",
			"write-rdonly-fh", "read-released", "getattr-forgotten",
			"link-onto-env", "link-onto-pem", "link-onto-gitconfig", "link-forged-old",
			"rename-onto-env", "rename-onto-pem", "rename-onto-gitconfig", "rename-env-away", "rename-gitconfig-away",
			"rename-forged-dir", "rename2-exchange-env", "stolen",
			"via-fl-env", "via-fl-etc", "via-fl-up", "via-fl-git", "via-fl-root", "via-fl-pem",
			"through-fl-git", "through-fl-root", "through-fl-up",
			"mknod-env", "mknod-pem", "mknod-gitconfig", "mknod-fifo", "mknod-chr", "mknod-blk",
			"create-env", "create-env-trunc", "create-pem", "create-gitconfig", "create-deploy-pem",
			"mkdir-pem", "mkdir-env", "unlink-env", "unlink-gitconfig",
			"ro-open-write", "ro-open-rdwr", "ro-open-trunc", "ro-open-append", "ro-write-rdonly-fh",
			"ro-truncate", "ro-chmod", "ro-utimes", "ro-chmod-dir", "ro-create", "ro-create-tools", "ro-mknod",
			"ro-mkdir", "ro-symlink", "ro-unlink", "ro-rmdir", "ro-link-in", "ro-link-out",
			"ro-mv-within", "ro-mv-out", "ro-mv-in", "ro-mv-dir", "ro-setxattr",
			"init-again", "read-huge",
		}
		for _, p := range refused {
			if !strings.Contains(out, "\n"+p+" err ") {
				t.Errorf("raw probe %s was not refused", p)
			}
		}
		// The probes that must get through, so that the refusals above
		// are the host's and not a broken driver's.
		for _, p := range []string{"create-victim", "split-request", "batch-forget-lie", "forget-storm", "final", "destroy"} {
			if !strings.Contains(out, "\n"+p+" ok") {
				t.Errorf("raw probe %s did not get through", p)
			}
		}
		var vq int
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(l, "readdir"):
				_, list, _ := strings.Cut(l, " ok ")
				list, err := strconv.Unquote(list)
				if names := strings.Split(list, "/"); err != nil || slices.Contains(names, ".env") || !slices.Contains(names, "README.md") {
					t.Errorf("raw listing: %s", l)
				}
			case strings.HasPrefix(l, "vq-"):
				// The backend serves nothing of a broken chain (it
				// stops the queue), and whatever the broken ring or
				// layout did to the device, a reset brings it back:
				// the host's side survived it.
				vq++
				if strings.Contains(l, " chain returned") != strings.HasPrefix(l, "vq-indirect-control ") {
					t.Errorf("a broken chain was served, or the well-formed one not: %s", l)
				}
				if !strings.HasSuffix(l, "; reset: answers") {
					t.Errorf("after a broken ring the device did not come back: %s", l)
				}
			case strings.Contains(l, " fail "):
				t.Errorf("raw exchange failed: %s", l)
			}
		}
		if vq < 30 {
			t.Errorf("%d queue probes ran", vq)
		}
		if !regexp.MustCompile(`\nvq-indirect-control chain returned \(0, \d+ bytes\); reply ok; then: answers;`).MatchString(out) {
			t.Errorf("a well-formed request through an indirect table was not answered")
		}
		if strings.Contains(out, "vfs-host-only") || len(bytes.TrimSpace(hostname)) > 0 && strings.Contains(out, string(bytes.TrimSpace(hostname))+`\n"`) {
			t.Errorf("the raw driver read a hidden or outside file")
		}
		for name, want := range map[string]string{".env": vfsEnvSecret + "\n", "keys/deploy.pem": vfsPEM + "\n",
			"src/deep/cert.pem": vfsPEM + "\n", "README.md": "hello from the host\n", ".git/config": string(gitConfig)} {
			if b, err := os.ReadFile(filepath.Join(work, name)); err != nil || string(b) != want {
				t.Errorf("host %s: %q, %v", name, b, err)
			}
		}
		for _, name := range []string{"src/fv-stolen", "src/x.pem", "src/m.pem", "src/c.pem", "d.pem", "src/fv-fifo", "src/fv-mem",
			"src/fv-sda", "src/fv-hard.go", "src/fv-moved.go", "src/fv-vendor", "src/fv-forged", "vendor/new.go", "tools/evil"} {
			if _, err := os.Lstat(filepath.Join(work, name)); err == nil {
				t.Errorf("the raw driver made %s on the host", name)
			}
		}
		if after := treeHash(t, filepath.Join(work, "vendor")) + treeHash(t, filepath.Join(work, "tools")); after != readOnlyBefore {
			t.Errorf("the read-only paths changed on the host: %s, then %s", readOnlyBefore, after)
		}

		// The sandbox still runs commands, and the device, given back
		// to the guest's driver, serves the mount again: the host's
		// side survived every broken ring.
		out, code = run("root", `cd /
echo alive
dev=$(grep -l 0x105a /sys/bus/pci/devices/*/device | head -1)
bdf=$(basename $(dirname $dev))
echo $bdf > /sys/bus/pci/drivers/virtio-pci/bind
mount -t virtiofs -o nosuid,nodev sbx-fs-0 /workspace
cat /workspace/README.md`)
		t.Logf("afterwards (exit %d):\n%s", code, out)
		if !strings.HasPrefix(out, "alive\n") {
			t.Fatalf("the sandbox no longer runs commands: %q", out)
		}
		if !strings.HasSuffix(out, "hello from the host\n") {
			t.Errorf("the device did not serve the mount again")
		}
	})

	if strings.Contains(guestOut.String(), "vfs-host-only") {
		t.Errorf("a host secret reached the guest")
	}
}
