package debrepo_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"golang.org/x/sys/unix"
)

// TestHostArchiveGitClosure resolves git and ca-certificates against the
// real Debian archive through the host's own apt sources, as sbx lock
// does, and checks that the closure holds what git needs at run time.
func TestHostArchiveGitClosure(t *testing.T) {
	srcs, err := debrepo.HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no Debian architecture name for", runtime.GOARCH)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cl := &debrepo.Client{Cache: c, Arch: runtime.GOARCH}
	start := time.Now()
	ix, err := cl.Index(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("index of %d sources in %v", len(srcs), time.Since(start))
	reqs := []debrepo.Request{{Name: "git"}, {Name: "ca-certificates"}}
	pkgs, err := debrepo.Resolve(ix, reqs, debrepo.ResolveOptions{Essential: true})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pkgs {
		names[p.Name] = true
		if p.SHA256 == "" || p.Filename == "" || !strings.HasPrefix(p.Filename, "pool/") {
			t.Errorf("%s: incomplete pin %q %q", p.ID(), p.Filename, p.SHA256)
		}
	}
	for _, want := range []string{"git", "ca-certificates", "libc6", "libcurl3-gnutls", "perl-base", "openssl", "coreutils", "dash"} {
		if !names[want] {
			t.Errorf("closure lacks %s", want)
		}
	}
	again, err := debrepo.Resolve(ix, reqs, debrepo.ResolveOptions{Essential: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(pkgs) {
		t.Fatalf("second resolution has %d packages, first %d", len(again), len(pkgs))
	}
	for i := range pkgs {
		if pkgs[i] != again[i] {
			t.Fatalf("resolution %d differs: %s vs %s", i, pkgs[i].ID(), again[i].ID())
		}
	}
	t.Logf("%d packages", len(pkgs))
}

// TestHostArchiveInstallGit downloads the git and ca-certificates
// closure from the host's apt sources, checks every package against its
// index hash, installs it into an empty tree and checks what a working
// git needs: the program, its libraries (through the merged /usr links),
// the dpkg database and the CA bundle.
func TestHostArchiveInstallGit(t *testing.T) {
	srcs, err := debrepo.HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Skip("the host has no apt sources")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("library paths below are x86-64's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := os.Getenv(cache.EnvRoot)
	if root == "" {
		root = t.TempDir()
	}
	c, err := cache.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	cl := &debrepo.Client{Cache: c, Arch: "amd64"}
	ix, err := cl.Index(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := debrepo.Resolve(ix, []debrepo.Request{{Name: "git"}, {Name: "ca-certificates"}}, debrepo.ResolveOptions{Essential: true})
	if err != nil {
		t.Fatal(err)
	}
	var fetched []debrepo.Fetched
	for _, p := range pkgs {
		path, err := cl.Download(ctx, srcs, debrepo.PinOf(p))
		if err != nil {
			t.Fatal(err)
		}
		fetched = append(fetched, debrepo.Fetched{Pin: debrepo.PinOf(p), Path: path})
	}
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if err := debrepo.Install(ctx, tree, fetched); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/usr/bin/git", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libcurl-gnutls.so.4", "/var/lib/dpkg/info/git.list", "/usr/bin/dash"} {
		if _, ok := tree.Lookup(p); !ok {
			t.Errorf("%s is missing", p)
		}
	}
	bundle := readTree(t, tree, "/etc/ssl/certs/ca-certificates.crt")
	if n := strings.Count(bundle, "BEGIN CERTIFICATE"); n < 100 {
		t.Errorf("the CA bundle holds %d certificates", n)
	}
	hashed := 0
	for _, p := range tree.Paths() {
		if name, ok := strings.CutPrefix(p, "/etc/ssl/certs/"); ok && len(name) == 10 && strings.HasSuffix(name, ".0") {
			e, _ := tree.Lookup(p)
			if _, ok := tree.Lookup("/etc/ssl/certs/" + e.Linkname); !ok {
				t.Errorf("%s links to %s, which is not there", p, e.Linkname)
			}
			hashed++
		}
	}
	if hashed < 100 {
		t.Errorf("%d hashed certificate links", hashed)
	}
	status := readTree(t, tree, "/var/lib/dpkg/status")
	if n := strings.Count(status, "Status: install ok installed"); n != len(pkgs) {
		t.Errorf("dpkg status lists %d packages, installed %d", n, len(pkgs))
	}

	// The host's ldconfig reads the ld.so.cache sbx wrote.
	cacheFile := filepath.Join(t.TempDir(), "ld.so.cache")
	if err := os.WriteFile(cacheFile, []byte(readTree(t, tree, "/etc/ld.so.cache")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ldconfig", "-p", "-C", cacheFile).CombinedOutput()
	if err != nil {
		t.Fatalf("ldconfig -p: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "libcurl-gnutls.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcurl-gnutls.so.4") {
		t.Errorf("ldconfig -p does not list libcurl-gnutls:\n%s", out)
	}

	// Unpacked, the tree runs git, which finds its libraries through
	// the cache.
	if os.Geteuid() != 0 {
		t.Log("not root: git is not run inside the tree")
		return
	}
	dir := t.TempDir()
	var tb bytes.Buffer
	if err := tree.WriteTar(&tb, 0); err != nil {
		t.Fatal(err)
	}
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdin = &tb
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	// git opens /dev/null; the guest agent mounts /dev at boot.
	if err := syscall.Mknod(filepath.Join(dir, "dev/null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "dev/null"), 0o666); err != nil {
		t.Fatal(err)
	}
	run := exec.CommandContext(ctx, "chroot", "--userspec=65534:65534", dir, "/usr/bin/git", "--version")
	run.Env = []string{"LD_DEBUG=libs", "PATH=/usr/bin", "HOME=/tmp"}
	out, err = run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "git version 2.") {
		t.Fatalf("git --version in the tree: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "search cache=/etc/ld.so.cache") || strings.Contains(string(out), "search path=") {
		t.Errorf("the loader did not find git's libraries in the cache:\n%s", out)
	}
	// Commands reached through alternatives links (which, awk) and the
	// shell work too.
	run = exec.CommandContext(ctx, "chroot", "--userspec=65534:65534", dir, "/bin/sh", "-c", "which git && echo x | awk '{print \"awk ok\"}' && id -un")
	run.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}
	out, err = run.CombinedOutput()
	if err != nil || string(out) != "/usr/bin/git\nawk ok\nnobody\n" {
		t.Errorf("shell in the tree: %v\n%s", err, out)
	}
}
