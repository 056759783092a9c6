package pipeline

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/plan/plantest"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// specDirs are the configuration directories of the repository's
// examples and test data, relative to this package.
func specDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, root := range []string{"../../examples", "../e2etest/testdata"} {
		ents, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			d := filepath.Join(root, e.Name())
			if hcl, _ := filepath.Glob(filepath.Join(d, "*.hcl")); len(hcl) > 0 {
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) < 8 {
		t.Fatalf("found only %d configurations: %v", len(dirs), dirs)
	}
	return dirs
}

// testLock locks every image of cfg (plantest.Lock).
func testLock(t *testing.T, cfg *lang.Config) *lockfiles.Lock {
	t.Helper()
	l, err := plantest.Lock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// builtImage is an image built for hash, with a manifest SandboxImage
// reads.
func builtImage(t *testing.T, name, hash string) *image.Result {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), image.ManifestFile)
	doc := fmt.Sprintf(`{"version": %d, "image": %q, "platform": "linux/amd64", "cmdline": "quiet"}`, image.ManifestVersion, name)
	if err := os.WriteFile(manifest, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return &image.Result{Image: name, InputHash: hash, BuildKey: "sha256:k", Manifest: manifest, KernelVersion: "6.6", DiskSize: 1 << 20,
		Outputs: map[string]image.Output{
			image.OutputKernel:    {Path: "/cache/vmlinuz", Digest: "sha256:01", Size: 1},
			image.OutputInitramfs: {Path: "/cache/initramfs", Digest: "sha256:02", Size: 2},
			image.OutputDisk:      {Path: "/cache/root.qcow2", Digest: "sha256:03", Size: 3},
		}}
}

// compareSpecs plans cfg, round-trips the plan through its JSON (as a
// saved plan is) and checks that the spec PlannedSpec makes from each
// sandbox's desired resource is SandboxSpec's for the configuration,
// field for field, or that both refuse. It returns how many sandboxes it
// compared.
func compareSpecs(t *testing.T, label string, cfg *lang.Config) int {
	t.Helper()
	desired, ds := plan.Desired(cfg, testLock(t, cfg))
	if ds.HasErrors() {
		t.Fatalf("%s: Desired: %v", label, ds)
	}
	saved, err := plan.FromState(desired, nil).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var p plan.Plan
	if err := p.UnmarshalJSON(saved); err != nil {
		t.Fatalf("%s: reading the plan back: %v", label, err)
	}
	hashes := map[string]string{}
	for _, c := range p.Changes {
		if c.After != nil && c.After.Image != nil {
			hashes[c.Addr.Name] = c.After.Image.InputHash
		}
	}
	n := 0
	for _, c := range p.Changes {
		if c.After == nil || c.After.Sandbox == nil {
			continue
		}
		sb := cfg.Sandboxes[c.Addr.Name]
		img := builtImage(t, sb.Image, hashes[sb.Image])
		want, wantErr := SandboxSpec(cfg, sb, img)
		got, gotErr := PlannedSpec(cfg.Dir, c.After, img)
		n++
		if (wantErr != nil) != (gotErr != nil) {
			t.Errorf("%s: sandbox.%s: SandboxSpec error %v, PlannedSpec error %v", label, sb.Name, wantErr, gotErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			wj, _ := json.MarshalIndent(want, "", " ")
			gj, _ := json.MarshalIndent(got, "", " ")
			t.Errorf("%s: sandbox.%s: the planned spec differs from the configuration's:\nplanned %s\nconfig  %s", label, sb.Name, gj, wj)
		}
	}
	return n
}

// upstream stands in for the test server's address that the egress
// test data leave open ("@UPSTREAM@").
const upstream = "127.0.0.1:8443"

func load(t *testing.T, dir string) *lang.Config {
	t.Helper()
	if files, _ := filepath.Glob(filepath.Join(dir, "*.hcl")); slices.ContainsFunc(files, func(f string) bool {
		b, err := os.ReadFile(f)
		return err == nil && strings.Contains(string(b), "@UPSTREAM@")
	}) {
		tmp := filepath.Join(t.TempDir(), filepath.Base(dir))
		if err := os.CopyFS(tmp, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out := strings.ReplaceAll(string(b), "@UPSTREAM@", upstream)
			if err := os.WriteFile(filepath.Join(tmp, filepath.Base(f)), []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, "upstream-ca.pem"), testCA(t), 0o644); err != nil {
			t.Fatal(err)
		}
		dir = tmp
	}
	// The one variable an example declares without a default.
	cfg, ds := lang.Load(dir, lang.Options{Environ: []string{"SBX_VAR_moltnet_sha256=" + strings.Repeat("ab", 32)}})
	if ds.HasErrors() {
		t.Fatalf("%s: %v", dir, ds)
	}
	return cfg
}

// TestPlannedSpecMatchesSandboxSpec: for every configuration of the
// examples and the test data, and variations of each (resources, both
// environments, every user of the image as the sandbox's and as each
// mount's owner, host directories relative, above, absolute, through a
// link inside the directory and through one leading out), the spec apply
// starts from a saved plan is the one the configuration resolves to.
func TestPlannedSpecMatchesSandboxSpec(t *testing.T) {
	total, withMounts := 0, 0
	for _, dir := range specDirs(t) {
		total += compareSpecs(t, dir, load(t, dir))
		for _, sb := range load(t, dir).Sandboxes {
			if len(sb.Policy.Mounts) > 0 {
				withMounts++
			}
		}

		cfg := load(t, dir)
		for _, sb := range cfg.Sandboxes {
			sb.CPUs, sb.Memory = 3, 3<<30
			if sb.Env == nil {
				sb.Env = map[string]string{}
			}
			sb.Env["ZZ_LAST"], sb.Env["AA_FIRST"] = "z", "a=b"
			img := cfg.Images[sb.Image]
			if img.Env == nil {
				img.Env = map[string]string{}
			}
			img.Env["IMAGE_ONLY"] = "1"
		}
		total += compareSpecs(t, dir+" (resources, env)", cfg)

		// A user of every image whose uid is not its gid.
		users := []string{"", "root", "planned"}
		for _, img := range load(t, dir).Images {
			for _, u := range img.Users {
				if !slices.Contains(users, u.Name) {
					users = append(users, u.Name)
				}
			}
		}
		for _, u := range users {
			cfg := load(t, dir)
			for _, img := range cfg.Images {
				img.Users = append(img.Users, &lang.User{Name: "planned", UID: 1234, GID: 4321})
			}
			for _, sb := range cfg.Sandboxes {
				if u != "" && u != "root" && !slices.ContainsFunc(cfg.Images[sb.Image].Users, func(x *lang.User) bool { return x.Name == u }) {
					continue
				}
				sb.User = u
				sb.Policy.Mounts = slices.Clone(sb.Policy.Mounts)
				for i := range sb.Policy.Mounts {
					if i%2 == 0 {
						sb.Policy.Mounts[i].Owner = ""
					} else {
						sb.Policy.Mounts[i].Owner = u
					}
				}
			}
			total += compareSpecs(t, fmt.Sprintf("%s (user %q)", dir, u), cfg)
		}

		for _, host := range hostVariations(t) {
			cfg := load(t, dir)
			cfg.Dir = host.dir
			for _, sb := range cfg.Sandboxes {
				sb.Policy.Mounts = append(slices.Clone(sb.Policy.Mounts), policy.Mount{Guest: "/variation", Host: host.host, Access: policy.ReadOnly})
			}
			total += compareSpecs(t, fmt.Sprintf("%s (host %q)", dir, host.host), cfg)
		}
	}
	t.Logf("compared %d specs", total)
	if total < 40 || withMounts == 0 {
		t.Errorf("compared %d specs, %d configurations with mounts: the cases do not cover the examples", total, withMounts)
	}
}

// testCA is a PEM certificate authority, which the egress test data
// name as upstream-ca.pem.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

type hostVariation struct{ dir, host string }

// hostVariations are mount host directories of a configuration in a
// directory with a link inside it and one leading out.
func hostVariations(t *testing.T) []hostVariation {
	cfgDir, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfgDir, "real", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(cfgDir, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(cfgDir, "out")); err != nil {
		t.Fatal(err)
	}
	var vs []hostVariation
	for _, h := range []string{".", "real/sub", "inside/sub", "out", "..", "../elsewhere", outside, "missing"} {
		vs = append(vs, hostVariation{cfgDir, h})
	}
	return vs
}

// TestPlannedSpecRefuses: an image built for another input hash (or
// provisioned when the plan's is not), and a
// resource without the owners of its mounts (written by an older sbx),
// are not started.
func TestPlannedSpecRefuses(t *testing.T) {
	a := &state.SandboxAttrs{Image: "box", ImageHash: "sha256:aa", Policy: policy.Sandbox{Mounts: []policy.Mount{{Guest: "/w", Host: "."}}},
		Mounts: []state.MountOwner{{Guest: "/w", UID: 7, GID: 8}}}
	r := &state.Resource{Addr: addrs.SandboxRef("s"), Sandbox: a}
	dir := t.TempDir()
	spec, err := PlannedSpec(dir, r, builtImage(t, "box", "sha256:aa"))
	if err != nil || len(spec.Mounts) != 1 || spec.Mounts[0].UID != 7 || spec.Mounts[0].GID != 8 {
		t.Fatalf("PlannedSpec = %+v, %v", spec, err)
	}
	if _, err := PlannedSpec(dir, r, builtImage(t, "box", "sha256:bb")); err == nil || !strings.Contains(err.Error(), "image hash sha256:aa") {
		t.Errorf("an image of another hash: %v", err)
	}
	// The same base provisioned is another image.
	provisioned := builtImage(t, "box", "sha256:aa")
	provisioned.ProvisionHash = "sha256:cc"
	if _, err := PlannedSpec(dir, r, provisioned); err == nil || !strings.Contains(err.Error(), "image hash sha256:aa") {
		t.Errorf("a provisioned image of the planned input hash: %v", err)
	}
	old := *a
	old.Mounts = nil
	if _, err := PlannedSpec(dir, &state.Resource{Addr: addrs.SandboxRef("s"), Sandbox: &old}, builtImage(t, "box", "sha256:aa")); err == nil || !strings.Contains(err.Error(), "plan again") {
		t.Errorf("no owners recorded: %v", err)
	}
	extra := *a
	extra.Mounts = append(slices.Clone(a.Mounts), state.MountOwner{Guest: "/x"})
	if _, err := PlannedSpec(dir, &state.Resource{Addr: addrs.SandboxRef("s"), Sandbox: &extra}, builtImage(t, "box", "sha256:aa")); err == nil {
		t.Error("more owners than mounts: no error")
	}
}
