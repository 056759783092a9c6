package command

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// fakeSum is a sha256 in the lock's form, derived from s.
func fakeSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// writeLockLikeSbxLock writes the lock file `sbx lock` writes for the
// configuration in dir, with made-up content: a pin of the kind each
// source needs, a package set with a few packages for an image's
// packages, and the image's input hash over them. Resolving for real
// needs a Debian mirror and an npm registry.
func writeLockLikeSbxLock(t *testing.T, dir string, environ []string) {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{Environ: environ})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	lock := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	for name, img := range cfg.Images {
		pins := map[string]*lockfiles.Pin{}
		for _, in := range recipe.Inputs(img) {
			src := in.Source
			p := &lockfiles.Pin{Source: src.Raw, Kind: string(src.Kind)}
			switch src.Kind {
			case lang.SourceNPM:
				p.Version, p.Integrity, p.SHA256 = "1.0.0", "sha512-"+strings.Repeat("A", 86)+"==", fakeSum(src.Raw)
			case lang.SourceDeb:
				p.Version, p.SHA256, p.Filename = "6.12.48-1", fakeSum(src.Raw), "linux-image-6.12.48-amd64_6.12.48-1_amd64.deb"
			case lang.SourceURL, lang.SourceFile:
				p.SHA256 = src.SHA256
				if p.SHA256 == "" {
					p.SHA256 = fakeSum(src.Raw)
				}
			default:
				p.Digest, p.Manifest = "sha256:"+fakeSum(src.Raw), "sha256:"+fakeSum(src.Raw+"m")
			}
			pins[in.Key] = p
		}
		if reqs := img.Packages.Requests; len(reqs) > 0 {
			pins[lockfiles.PackagesKey] = &lockfiles.Pin{Source: strings.Join(reqs, ", "), Kind: lockfiles.KindDebPackages, Digest: "sha256:" + fakeSum(strings.Join(reqs, ","))}
			for _, pkg := range []string{"bash", "coreutils", "git", "libc6"} {
				pins[lockfiles.PackageKeyPrefix+pkg] = &lockfiles.Pin{Source: pkg, Kind: lockfiles.KindDebPackage, Version: "1.0-1", Architecture: "amd64",
					Filename: pkg + "_1.0-1_amd64.deb", SHA256: fakeSum(pkg), Size: "1000"}
			}
		}
		hash, err := recipe.InputHash(img, pins)
		if err != nil {
			t.Fatal(err)
		}
		lock.Images[name] = &lockfiles.Image{Name: name, Platform: img.Platform.String(), InputHash: hash, Inputs: pins}
	}
	if err := lockfiles.Write(filepath.Join(dir, lockfiles.FileName), lock); err != nil {
		t.Fatal(err)
	}
	if _, diags := lockfiles.Read(filepath.Join(dir, lockfiles.FileName)); diags.HasErrors() {
		t.Fatalf("the lock written is not one sbx reads: %v", diags)
	}
}

// TestReadmeReviewFlow runs the README's command sequence on its own
// example, examples/agent-debian, in a git repository made here whose
// last commit has the example and no lock file, as a new user's clone
// does: validate, fmt, lock, plan against the state with -out, the review
// command `sbx plan -against HEAD -fail-on-widen examples/agent-debian`,
// and show. The review command must pass: HEAD has no lock, so both sides
// are compared by their specs, packages included. `sbx lock` is played by
// writing the lock file it writes (resolving for real needs a Debian
// mirror, an npm registry and the moltnet release host), and `sbx lock
// -lockfile=readonly`, which resolves again to compare, is left out.
func TestReadmeReviewFlow(t *testing.T) {
	spec, err := os.ReadFile("../../examples/agent-debian/agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	// The README sets the moltnet digest through the environment.
	f.environ = append(f.environ, "SBX_VAR_moltnet_sha256="+fakeSum("moltnet"))
	repo := t.TempDir()
	dir := filepath.Join(repo, "examples", "agent-debian")
	writeFile(t, filepath.Join(dir, "agent.hcl"), string(spec))
	f.gitRun(repo, "init", "-q")
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "the example, as cloned")
	t.Chdir(repo)

	f.mustRun(ExitOK, "validate", "examples/agent-debian")
	f.mustRun(ExitOK, "fmt", "-check", "-diff", "-recursive", "examples/")
	writeLockLikeSbxLock(t, dir, f.environ) // sbx lock examples/agent-debian
	f.mustRun(ExitChanges, "plan", "-detailed-exitcode", "-out", "agent.plan", "examples/agent-debian")

	r := f.mustRun(ExitOK, "plan", "-against", "HEAD", "-fail-on-widen", "examples/agent-debian")
	for _, want := range []string{"HEAD has no " + lockfiles.FileName, "No changes"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the review command's plan lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.stderr, "not locked") {
		t.Errorf("the review command says an image is not locked:\n%s", r)
	}

	f.mustRun(ExitOK, "show", "agent.plan")
	f.mustRun(ExitOK, "show", "examples/agent-debian/sbx.lock.hcl")
}
