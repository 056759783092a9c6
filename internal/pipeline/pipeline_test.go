package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

const spec = `image "box" {
  platform = "linux/amd64"

  kernel {
    source = "file:./kernel.deb"
  }

  artifact "data" {
    source = "file:./data.txt"
    dest   = "/etc/data.txt"
  }
}

sandbox "box" {
  image = image.box
}
`

// config writes a configuration whose inputs are local files, which
// locking hashes without any network, and loads it.
func config(t *testing.T) *lang.Config {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"main.hcl": spec, "kernel.deb": "a kernel package\n", "data.txt": "data\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, diags := lang.Load(dir, lang.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

func lock(t *testing.T, cfg *lang.Config, opts pipeline.LockOptions) *pipeline.Locked {
	t.Helper()
	l, diags := pipeline.Lock(context.Background(), cfg, pipeline.Env{Environ: []string{}}, opts)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return l
}

func TestLock(t *testing.T) {
	cfg := config(t)
	path := filepath.Join(cfg.Dir, lockfiles.FileName)

	// Read-only, only if stale: a missing lock file is stale, and
	// nothing is resolved or written.
	l := lock(t, cfg, pipeline.LockOptions{IfStale: true, ReadOnly: true})
	if !l.Stale.HasErrors() || l.Lock != nil || l.Wrote {
		t.Errorf("no lock file, read-only: stale %v, lock %v, wrote %v; want stale, no lock, nothing written", l.Stale, l.Lock, l.Wrote)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("a read-only lock wrote %s", path)
	}

	// Locking writes the file with every pin; only if stale, as
	// building does, too.
	for _, ifStale := range []bool{true, false} {
		os.Remove(path)
		l = lock(t, cfg, pipeline.LockOptions{IfStale: ifStale})
		if !l.Wrote || l.Old != nil || len(l.Changes) != 2 || l.Lock.Lookup("box") == nil {
			t.Fatalf("first lock (only if stale: %v): wrote %v, old %v, %d changes, lock %v; want the file written with two new pins", ifStale, l.Wrote, l.Old, len(l.Changes), l.Lock)
		}
	}
	written, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(written, lockfiles.Marshal(l.Lock)) {
		t.Fatalf("%s does not hold the lock returned (%v)", path, err)
	}

	// Again: nothing changes, nothing is written; only if stale, nothing
	// is even resolved: the file's lock is the one in force.
	l = lock(t, cfg, pipeline.LockOptions{})
	if l.Wrote || l.Differs || len(l.Changes) != 0 || !l.Lock.Equal(l.Old) {
		t.Errorf("second lock: wrote %v, differs %v, changes %v; want nothing to do", l.Wrote, l.Differs, l.Changes)
	}
	l = lock(t, cfg, pipeline.LockOptions{IfStale: true, ReadOnly: true})
	if l.Stale != nil || l.Lock != l.Old {
		t.Errorf("an up-to-date lock, only if stale: stale %v, lock %p, old %p; want the file's lock as it is", l.Stale, l.Lock, l.Old)
	}

	// A changed input: read-only reports that the file would change and
	// leaves it; otherwise it is written.
	if err := os.WriteFile(filepath.Join(cfg.Dir, "data.txt"), []byte("other data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = lock(t, cfg, pipeline.LockOptions{ReadOnly: true})
	if !l.Differs || l.Wrote || l.Lock != nil || len(l.Changes) != 1 || l.Changes[0].Key != "artifact.data" {
		t.Errorf("read-only after a change: differs %v, wrote %v, lock %v, changes %v; want one change to artifact.data, nothing written", l.Differs, l.Wrote, l.Lock, l.Changes)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, written) {
		t.Errorf("a read-only lock changed %s", path)
	}
	l = lock(t, cfg, pipeline.LockOptions{})
	if !l.Wrote || l.Old == nil {
		t.Errorf("after a change: wrote %v, old %v; want the file rewritten", l.Wrote, l.Old)
	}

	// The lock file is read through Read when it is given.
	var read []string
	lock(t, cfg, pipeline.LockOptions{Read: func(p string) (*lockfiles.Lock, []byte, hcl.Diagnostics) {
		read = append(read, p)
		return pipeline.ReadLock(p)
	}})
	if len(read) != 1 || read[0] != path {
		t.Errorf("Read was called for %v, want once for %s", read, path)
	}
}

// A lock file that cannot be parsed is an error whose snippet Sources
// can show, and it is left as it was.
func TestLockBrokenFile(t *testing.T) {
	cfg := config(t)
	path := filepath.Join(cfg.Dir, lockfiles.FileName)
	broken := []byte("image \"box\" {\n<<<<<<< HEAD\n")
	if err := os.WriteFile(path, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	l, diags := pipeline.Lock(context.Background(), cfg, pipeline.Env{Environ: []string{}}, pipeline.LockOptions{})
	if !diags.HasErrors() || l.Lock != nil || l.Wrote {
		t.Fatalf("a broken lock file: diags %v, lock %v, wrote %v; want an error and nothing written", diags, l.Lock, l.Wrote)
	}
	if f := l.Sources()[path]; f == nil || !bytes.Equal(f.Bytes, broken) {
		t.Errorf("Sources lacks the lock file's bytes for snippets")
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, broken) {
		t.Errorf("the broken lock file was changed")
	}
}

func TestEpoch(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int64
		ok    bool
	}{
		{"", 0, true},
		{"1700000000", 1700000000, true},
		{"4294967295", 4294967295, true},
		{"4294967296", 0, false},
		{"-1", 0, false},
		{"yesterday", 0, false},
	} {
		got, err := pipeline.Epoch(pipeline.Env{Environ: []string{"SOURCE_DATE_EPOCH=" + tc.value}})
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %d, %v; want %d", tc.value, got, err, tc.want)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH")) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %d, %v; want an error naming it", tc.value, got, err)
		}
	}
}

func TestLookups(t *testing.T) {
	cfg := config(t)
	if img, err := pipeline.Image(cfg, "image.box"); err != nil || img.Name != "box" {
		t.Errorf("Image(image.box) = %v, %v", img, err)
	}
	if sb, err := pipeline.Sandbox(cfg, "box"); err != nil || sb.Name != "box" {
		t.Errorf("Sandbox(box) = %v, %v", sb, err)
	}
	if _, err := pipeline.Image(cfg, "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "box") {
		t.Errorf("Image(nope): %v; want an error listing the images", err)
	}
	if _, err := pipeline.Sandbox(cfg, "sandbox.nope"); err == nil || !strings.Contains(err.Error(), "box") {
		t.Errorf("Sandbox(sandbox.nope): %v; want an error listing the sandboxes", err)
	}
}
