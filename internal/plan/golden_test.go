package plan_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the plan.txt and plan.json sections of testdata/*.txtar")

// goldenLineage is the lineage of the state the golden cases plan against.
const goldenLineage = "5b0f3c1e-8a2d-4e7f-9c61-2d4b7a90e3f5"

// TestGolden plans each testdata/<case>.txtar and compares the text and
// JSON renderings with the archive's plan.txt and plan.json.
//
// An archive holds the configuration before the change (files under
// before/; none for a first plan) and after it (under after/). By default
// the before configuration is taken as applied (its desired resources are
// the state) and after is planned against that state. A case whose
// comment has a line "against: LABEL" plans after against before with
// Against instead, without state; a line "unlocked: before" (or "after")
// plans it as if that side had no lock file (AgainstSides). Every plan
// carries the mount reports of the after configuration (InspectMounts)
// over its files as the archive has them, and where this host reads each
// of its secrets (SecretSources) with the bindings of the archive's
// bindings.hcl, taken as ~/.config/sbx/bindings.hcl (none when it has
// none); a line "many: PATH COUNT" adds
// COUNT empty files named by the printf pattern PATH (with one %d), for
// trees too big to list in the archive.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden cases in testdata")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) { runGolden(t, file) })
	}
}

func runGolden(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var hasBefore, hasAfter bool
	for _, f := range ar.Files {
		side, _, _ := strings.Cut(f.Name, "/")
		switch side {
		case "before":
			hasBefore = true
		case "after":
			hasAfter = true
		default:
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !hasAfter {
		t.Fatal("archive has no after/ files")
	}

	var against, unlocked string
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		if v, ok := strings.CutPrefix(line, "many:"); ok {
			var pattern string
			var count int
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%s %d", &pattern, &count); err != nil {
				t.Fatalf("many: %q: %v", line, err)
			}
			for i := range count {
				path := filepath.Join(dir, filepath.FromSlash(fmt.Sprintf(pattern, i)))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if v, ok := strings.CutPrefix(line, "against:"); ok {
			against = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "unlocked:"); ok {
			unlocked = strings.TrimSpace(v)
		}
	}

	afterCfg, afterLock := loadWithPins(t, filepath.Join(dir, "after"))
	var p *plan.Plan
	var diags hcl.Diagnostics
	switch {
	case against != "":
		if !hasBefore {
			t.Fatal("an against case needs before/ files")
		}
		beforeCfg, beforeLock := loadWithPins(t, filepath.Join(dir, "before"))
		p, diags = plan.AgainstSides(
			plan.Side{Config: afterCfg, Lock: afterLock, Unlocked: unlocked == "after"},
			plan.Side{Config: beforeCfg, Lock: beforeLock, Unlocked: unlocked == "before"},
			against)
	case hasBefore:
		beforeCfg, beforeLock := loadWithPins(t, filepath.Join(dir, "before"))
		applied, d := plan.Desired(beforeCfg, beforeLock)
		if d.HasErrors() {
			t.Fatalf("before: %v", d)
		}
		st := &state.State{FormatVersion: state.FormatVersion, Lineage: goldenLineage, Serial: 1, Resources: applied}
		var desired []*state.Resource
		desired, diags = plan.Desired(afterCfg, afterLock)
		p = plan.FromState(desired, st)
	default:
		var desired []*state.Resource
		desired, diags = plan.Desired(afterCfg, afterLock)
		p = plan.FromState(desired, nil)
	}
	if diags.HasErrors() {
		t.Fatalf("plan: %v", diags)
	}
	p.Mounts = plan.InspectMounts(context.Background(), afterCfg, plan.InspectOptions{})
	var binds *bindings.File
	if src := section(ar, "bindings.hcl"); src != nil {
		var d hcl.Diagnostics
		binds, d = bindings.Parse(src, "/home/user/.config/sbx/bindings.hcl", bindings.Options{Home: "/home/user"})
		if d.HasErrors() {
			t.Fatalf("bindings.hcl: %v", d)
		}
	}
	p.Secrets = plan.SecretSources(afterCfg, binds)

	var text bytes.Buffer
	if err := plan.Render(&text, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	js, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')

	got := map[string][]byte{"plan.txt": text.Bytes(), "plan.json": js}
	if *update {
		for name, data := range got {
			setSection(ar, name, data)
		}
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, name := range []string{"plan.txt", "plan.json"} {
		want := section(ar, name)
		if want == nil {
			t.Errorf("%s: no %s section; run go test ./internal/plan -update", file, name)
			continue
		}
		if !bytes.Equal(want, got[name]) {
			t.Errorf("%s: %s differs from golden (run go test ./internal/plan -update to accept):\n%s",
				file, name, udiff.Unified("want/"+name, "got/"+name, string(want), string(got[name])))
		}
	}

	// The JSON form reads back to the same plan.
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := plan.WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	back, err := plan.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := plan.Render(&again, back, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if again.String() != text.String() {
		t.Errorf("the plan read back from JSON renders differently:\n%s",
			udiff.Unified("written", "read", text.String(), again.String()))
	}
}

func section(ar *txtar.Archive, name string) []byte {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

func setSection(ar *txtar.Archive, name string, data []byte) {
	for i, f := range ar.Files {
		if f.Name == name {
			ar.Files[i].Data = data
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: data})
}

// loadWithPins loads the configuration in dir and locks it without
// network access: every input is pinned to digests derived from its source
// string. Resolving real sources (OCI registries, npm, URLs) is tested in
// builders/resolve against local servers; planning only needs pins that
// are stable and change when the source string changes.
func loadWithPins(t testing.TB, dir string) (*lang.Config, *lockfiles.Lock) {
	t.Helper()
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatalf("loading %s: %v", dir, diags)
	}
	lock, err := pinAll(cfg)
	if err != nil {
		t.Fatalf("locking %s: %v", dir, err)
	}
	return cfg, lock
}

// pinAll builds the lock of cfg with deterministic pins (see loadWithPins).
func pinAll(cfg *lang.Config) (*lockfiles.Lock, error) {
	lock := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	for name, img := range cfg.Images {
		li := &lockfiles.Image{Name: name, Platform: img.Platform.String(), Inputs: map[string]*lockfiles.Pin{}}
		for _, in := range recipe.Inputs(img) {
			li.Inputs[in.Key] = fakePin(in.Source)
		}
		hash, err := recipe.InputHash(img, li.Inputs)
		if err != nil {
			return nil, err
		}
		li.InputHash = hash
		li.ProvisionHash = recipe.ProvisionHash(img)
		lock.Images[name] = li
	}
	return lock, nil
}

func fakePin(src *lang.Source) *lockfiles.Pin {
	sum := sha256.Sum256([]byte(src.Raw))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	pin := &lockfiles.Pin{Source: src.Raw, Kind: string(src.Kind)}
	switch src.Kind {
	case lang.SourceOCI, lang.SourceOCILayout:
		manifest := sha256.Sum256([]byte(src.Raw + "#manifest"))
		pin.Digest = digest
		pin.Manifest = "sha256:" + hex.EncodeToString(manifest[:])
	case lang.SourceNPM:
		integrity := sha512.Sum512([]byte(src.Raw))
		pin.Version = src.Version
		pin.Integrity = "sha512-" + base64.StdEncoding.EncodeToString(integrity[:])
		pin.SHA256 = hex.EncodeToString(sum[:])
	case lang.SourceDeb:
		pin.Version = src.Version
		pin.SHA256 = hex.EncodeToString(sum[:])
		pin.Filename = src.Ref + "_" + src.Version + "_amd64.deb"
	default:
		pin.SHA256 = src.SHA256
		if pin.SHA256 == "" {
			pin.SHA256 = hex.EncodeToString(sum[:])
		}
	}
	return pin
}
