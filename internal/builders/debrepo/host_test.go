package debrepo_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/builders/cache"
	"github.com/sbx-dev/sbx/internal/builders/debrepo"
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
