package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/state"
)

func TestValidateExamples(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, dir := range dirs {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// examples/agent-debian leaves the moltnet release's digest
			// to its users.
			f := &fixture{t: t, environ: []string{"PATH=" + os.Getenv("PATH"),
				"SBX_VAR_moltnet_sha256=" + strings.Repeat("0", 64)}}
			r := f.mustRun(ExitOK, "validate", dir)
			if !strings.Contains(r.stdout, "is valid") {
				t.Errorf("validate printed no success message:\n%s", r)
			}
			if r.stderr != "" {
				t.Errorf("validate printed diagnostics for an example:\n%s", r)
			}
		})
	}
	for _, want := range []string{"agent", "quickstart", "minimal"} {
		if _, err := os.Stat(filepath.Join("../../examples", want)); err != nil {
			t.Errorf("example %s: %v", want, err)
		}
	}
	if n < 3 {
		t.Fatalf("found %d example directories, want at least 3", n)
	}
}

func TestValidateBroken(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `image "box" {
  platform = "linux/amd64"
  bsae     = "alpine:3.23"
}
`)
	f := &fixture{t: t}
	r := f.mustRun(ExitError, "validate", dir)
	if !strings.Contains(r.stderr, "main.hcl line 3") {
		t.Errorf("stderr does not name main.hcl line 3:\n%s", r)
	}
	if !strings.Contains(r.stderr, `bsae`) {
		t.Errorf("stderr does not show the offending source:\n%s", r)
	}
	if strings.Contains(r.stderr, "\x1b[") {
		t.Errorf("colour codes written to a non-terminal:\n%q", r.stderr)
	}
	if strings.Contains(r.stdout, "valid") {
		t.Errorf("stdout claims success:\n%s", r)
	}
	if n := strings.Count(r.stderr, "Error: "); n != 1 {
		t.Errorf("want the error printed exactly once, got %d times:\n%s", n, r)
	}
}

func TestValidateVariables(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `variable "cpus" {
  default = 1
}

image "box" {
  platform = "linux/amd64"
  base     = "alpine:3.23"
}

sandbox "box" {
  image = image.box
  cpus  = var.cpus
}
`)
	writeFile(t, filepath.Join(dir, "vars.hcl.in"), "cpus = 4\n")
	f := &fixture{t: t}
	f.mustRun(ExitOK, "validate", "-var", "cpus=2", dir)
	f.mustRun(ExitOK, "validate", "-var-file", filepath.Join(dir, "vars.hcl.in"), dir)
	r := f.mustRun(ExitError, "validate", "-var", "cpus=many", dir)
	if !strings.Contains(r.stderr, "cpus") {
		t.Errorf("a bad -var value is not reported by name:\n%s", r)
	}
	f.environ = []string{"SBX_VAR_cpus=lots"}
	f.mustRun(ExitError, "validate", dir)
}

const unformatted = `image "box" {
  platform = "linux/amd64"
    base = "alpine:3.23"
}
`

func TestFmt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "main.hcl")
	writeFile(t, path, unformatted)
	writeFile(t, filepath.Join(dir, lockfiles.FileName), "# not touched by fmt\n  x = 1\n")
	f := &fixture{t: t}

	r := f.mustRun(ExitUnformatted, "fmt", "-check", dir)
	if !strings.Contains(r.stdout, path) {
		t.Errorf("fmt -check does not list %s:\n%s", path, r)
	}
	if got := string(readFile(t, path)); got != unformatted {
		t.Fatalf("fmt -check changed the file:\n%s", got)
	}

	r = f.mustRun(ExitUnformatted, "fmt", "-check", "-diff", dir)
	if !strings.Contains(r.stdout, "-    base = ") || !strings.Contains(r.stdout, "+  base     = ") || !strings.Contains(r.stdout, "@@") {
		t.Errorf("fmt -diff printed no unified diff of the change:\n%s", r)
	}

	f.mustRun(ExitOK, "fmt", dir)
	got := string(readFile(t, path))
	if got == unformatted || !strings.Contains(got, "  base     = \"alpine") {
		t.Fatalf("fmt did not rewrite the file:\n%s", got)
	}
	r = f.mustRun(ExitOK, "fmt", "-check", dir)
	if r.stdout != "" {
		t.Errorf("fmt -check lists files after formatting:\n%s", r)
	}
	if got := string(readFile(t, filepath.Join(dir, lockfiles.FileName))); got != "# not touched by fmt\n  x = 1\n" {
		t.Errorf("fmt rewrote the lock file:\n%s", got)
	}
}

func TestFmtSyntaxError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.hcl")
	const src = "image \"box\" {\n  base = \n"
	writeFile(t, path, src)
	f := &fixture{t: t}
	r := f.mustRun(ExitError, "fmt", path)
	if !strings.Contains(r.stderr, "bad.hcl") {
		t.Errorf("syntax error does not name the file:\n%s", r)
	}
	if got := string(readFile(t, path)); got != src {
		t.Errorf("fmt changed a file with a syntax error:\n%s", got)
	}
}

func TestFmtStdin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run([]string{"fmt", "-"}, &Env{Stdin: strings.NewReader(unformatted), Stdout: &stdout, Stderr: &stderr})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "  base     = ") {
		t.Errorf("fmt - did not print the formatted input:\n%s", stdout.String())
	}
}

func TestLockTwiceIsByteIdentical(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	lockPath := filepath.Join(dir, lockfiles.FileName)

	r := f.mustRun(ExitOK, "lock", dir)
	if !strings.Contains(r.stdout, "Created") || !strings.Contains(r.stdout, "artifact.tool") || !strings.Contains(r.stdout, "base") {
		t.Errorf("lock does not report what it pinned:\n%s", r)
	}
	first := readFile(t, lockPath)
	if !bytes.Contains(first, []byte("1.0.0")) || !bytes.Contains(first, []byte("sha256:")) {
		t.Errorf("lock file lacks the pins:\n%s", first)
	}
	if bytes.Contains(first, []byte(secretValue)) {
		t.Fatal("lock file holds the secret value")
	}
	info1, err := os.Stat(lockPath)
	if err != nil {
		t.Fatal(err)
	}

	r = f.mustRun(ExitOK, "lock", dir)
	if !strings.Contains(r.stdout, "up to date") {
		t.Errorf("second lock does not say the file is up to date:\n%s", r)
	}
	if second := readFile(t, lockPath); !bytes.Equal(first, second) {
		t.Fatalf("second lock changed the file:\n%s\n---\n%s", first, second)
	}
	info2, err := os.Stat(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(info1, info2) {
		t.Error("second lock rewrote the file although nothing changed")
	}
	f.mustRun(ExitOK, "lock", "-lockfile=readonly", dir)
}

func TestLockReadonlyRefusesChanges(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	lockPath := filepath.Join(dir, lockfiles.FileName)
	f.mustRun(ExitOK, "lock", dir)
	before := readFile(t, lockPath)

	f.writeConfig(dir, specOptions{baseTag: "v2"})
	r := f.mustRun(ExitError, "lock", "-lockfile=readonly", dir)
	if !strings.Contains(r.stderr, "image.box base") || !strings.Contains(r.stderr, "readonly") {
		t.Errorf("readonly failure does not list the change:\n%s", r)
	}
	if after := readFile(t, lockPath); !bytes.Equal(before, after) {
		t.Fatalf("-lockfile=readonly changed the lock file")
	}

	// Without readonly the moved pin is written.
	r = f.mustRun(ExitOK, "lock", dir)
	if !strings.Contains(r.stdout, "~ image.box base") {
		t.Errorf("lock does not report the moved pin:\n%s", r)
	}
	if after := readFile(t, lockPath); bytes.Equal(before, after) {
		t.Fatal("lock did not update the moved pin")
	}

	// -var moves an npm pin.
	r = f.mustRun(ExitOK, "lock", "-var", "tool_version=1.1.0", dir)
	if !strings.Contains(r.stdout, "1.1.0") {
		t.Errorf("lock does not report the new npm version:\n%s", r)
	}
}

func TestLockWithoutFileInReadonlyFails(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitError, "lock", "-lockfile=readonly", dir)
	if _, err := os.Stat(filepath.Join(dir, lockfiles.FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readonly lock created the lock file (stat: %v)", err)
	}
}

func TestFailedLockKeepsOldFile(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	lockPath := filepath.Join(dir, lockfiles.FileName)
	f.mustRun(ExitOK, "lock", dir)
	before := readFile(t, lockPath)

	f.writeConfig(dir, specOptions{baseTag: "missing"})
	r := f.mustRun(ExitError, "lock", dir)
	if !strings.Contains(r.stderr, "main.hcl") || !strings.Contains(r.stderr, "missing") {
		t.Errorf("lock failure does not point at the source:\n%s", r)
	}
	if after := readFile(t, lockPath); !bytes.Equal(before, after) {
		t.Fatal("a failed lock changed the lock file")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a failed lock left %s behind", e.Name())
		}
	}
}

func TestPlanDetailedExitcode(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)

	r := f.mustRun(ExitChanges, "plan", "-detailed-exitcode", dir)
	for _, want := range []string{"image.box", "sandbox.box", "api.example.com", "Plan:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, r)
		}
	}
	f.mustRun(ExitOK, "plan", dir) // changes, but no -detailed-exitcode

	applyState(t, dir)
	r = f.mustRun(ExitOK, "plan", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "No changes") {
		t.Errorf("plan after apply shows changes:\n%s", r)
	}

	f.writeConfig(dir, specOptions{cpus: 2})
	r = f.mustRun(ExitChanges, "plan", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "cpus") {
		t.Errorf("plan does not show the cpus change:\n%s", r)
	}
}

// TestPlanNeverResolves checks that plan, with or without
// -lockfile=readonly, resolves nothing: a configuration whose lock file is
// missing or lacks a pin is an error naming sbx lock, the lock file is not
// written and the npm registry is not asked. After sbx lock, plan works.
func TestPlanNeverResolves(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	lockPath := filepath.Join(dir, lockfiles.FileName)

	for _, args := range [][]string{{"plan", "-lockfile=readonly", dir}, {"plan", "-json", dir}, {"plan", dir}} {
		r := f.mustRun(ExitError, args...)
		if !strings.Contains(r.stderr, "Run \"sbx lock\"") || !strings.Contains(r.stderr, "does not exist") {
			t.Errorf("%q without a lock does not say to run sbx lock:\n%s", args, r)
		}
		if _, err := os.Stat(lockPath); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%q wrote the lock file (stat: %v)", args, err)
		}
	}
	if n := f.npm.requestCount(); n != 0 {
		t.Errorf("plan asked the npm registry %d times", n)
	}

	f.mustRun(ExitOK, "lock", dir)
	r := f.mustRun(ExitOK, "plan", "-json", dir)
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("plan -json stdout is not only JSON: %v\n%s", err, r)
	}

	// A new pin the lock lacks is an error too, and the lock is left.
	before := readFile(t, lockPath)
	asked := f.npm.requestCount()
	f.writeConfig(dir, specOptions{toolVersion: "1.1.0"})
	r = f.mustRun(ExitError, "plan", dir)
	if !strings.Contains(r.stderr, "is not up to date") || !strings.Contains(r.stderr, "sbx lock") {
		t.Errorf("plan with a stale lock:\n%s", r)
	}
	if !bytes.Equal(readFile(t, lockPath), before) {
		t.Error("plan changed the lock file")
	}
	if n := f.npm.requestCount(); n != asked {
		t.Errorf("plan asked the npm registry %d times", n-asked)
	}
}

func TestPlanOutAndShow(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	out := filepath.Join(t.TempDir(), "box.plan")

	planned := f.mustRun(ExitOK, "plan", "-out", out, dir)
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("plan -out wrote no file: %v", err)
	}
	if bytes.Contains(readFile(t, out), []byte(secretValue)) {
		t.Fatal("the plan file holds the secret value")
	}
	r := f.mustRun(ExitOK, "show", out)
	if !strings.Contains(r.stdout, "sandbox.box") || !strings.Contains(r.stdout, "Plan:") {
		t.Errorf("show does not render the saved plan:\n%s", r)
	}
	if !strings.HasPrefix(planned.stdout, r.stdout) {
		t.Errorf("show renders the plan differently from plan:\n--- plan\n%s--- show\n%s", planned.stdout, r.stdout)
	}
	r = f.mustRun(ExitOK, "show", "-json", out)
	var doc struct {
		FormatVersion string `json:"format_version"`
		Changes       []struct {
			Address string `json:"address"`
			Action  string `json:"action"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("show -json: %v\n%s", err, r)
	}
	if doc.FormatVersion == "" || len(doc.Changes) != 2 || doc.Changes[1].Address != "sandbox.box" || doc.Changes[1].Action != "create" {
		t.Errorf("show -json: unexpected plan %+v", doc)
	}

	// A failed plan writes no file.
	failed := filepath.Join(t.TempDir(), "failed.plan")
	writeFile(t, filepath.Join(dir, "broken.hcl"), "sandbox \"x\" {\n  image = image.nope\n}\n")
	f.mustRun(ExitError, "plan", "-out", failed, dir)
	if _, err := os.Stat(failed); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed plan wrote %s (stat: %v)", failed, err)
	}
}

func TestShowLockAndState(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)

	r := f.mustRun(ExitOK, "show", dir)
	if !strings.Contains(r.stdout, "No state") {
		t.Errorf("show of a directory without state:\n%s", r)
	}

	r = f.mustRun(ExitOK, "show", filepath.Join(dir, lockfiles.FileName))
	if !strings.Contains(r.stdout, "image.box") || !strings.Contains(r.stdout, "npm:@acme/tool@1.0.0") {
		t.Errorf("show of the lock file:\n%s", r)
	}
	r = f.mustRun(ExitOK, "show", "-json", filepath.Join(dir, lockfiles.FileName))
	var lock struct {
		Images map[string]struct {
			InputHash string `json:"input_hash"`
			Inputs    map[string]struct {
				Version string `json:"version"`
			} `json:"inputs"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &lock); err != nil {
		t.Fatalf("show -json lock: %v\n%s", err, r)
	}
	if img := lock.Images["box"]; !strings.HasPrefix(img.InputHash, "sha256:") || img.Inputs["artifact.tool"].Version != "1.0.0" {
		t.Errorf("show -json lock: unexpected %+v", lock)
	}

	applyState(t, dir)
	statePath := filepath.Join(dir, ".sbx", "state.json")
	for _, target := range []string{dir, statePath} {
		r = f.mustRun(ExitOK, "show", target)
		for _, want := range []string{"image.box", "sandbox.box", "api.example.com", "env:API_TOKEN", "512MiB"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("show %s lacks %q:\n%s", target, want, r)
			}
		}
	}
	r = f.mustRun(ExitOK, "show", "-json", statePath)
	var st struct {
		Lineage   string `json:"lineage"`
		Resources []struct {
			Address string `json:"address"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Lineage == "" || len(st.Resources) != 2 {
		t.Errorf("show -json state: %v %+v\n%s", err, st, r)
	}

	other := filepath.Join(t.TempDir(), "notes.json")
	writeFile(t, other, `{"hello": 1}`)
	r = f.mustRun(ExitError, "show", other)
	if !strings.Contains(r.stderr, "not a plan, lock, state or image file") {
		t.Errorf("show of an unknown file:\n%s", r)
	}
}

func TestPlanFailOnWiden(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{allow: []string{"api.example.com", "docs.example.com"}})
	f.mustRun(ExitOK, "lock", dir)
	applyState(t, dir)

	// Narrowing passes -fail-on-widen.
	f.writeConfig(dir, specOptions{allow: []string{"api.example.com"}})
	r := f.mustRun(ExitChanges, "plan", "-fail-on-widen", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "docs.example.com") {
		t.Errorf("plan does not show the narrowing change:\n%s", r)
	}

	// Widening fails, and takes precedence over -detailed-exitcode.
	f.writeConfig(dir, specOptions{allow: []string{"api.example.com", "docs.example.com", "*.evil.example"}})
	out := filepath.Join(t.TempDir(), "widen.plan")
	r = f.mustRun(ExitError, "plan", "-fail-on-widen", "-detailed-exitcode", "-out", out, dir)
	if !strings.Contains(r.stderr, "widens") || !strings.Contains(r.stderr, "*.evil.example") {
		t.Errorf("-fail-on-widen does not name the widening change:\n%s", r)
	}
	if !strings.Contains(r.stdout, "*.evil.example") {
		t.Errorf("the widening plan was not shown:\n%s", r)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("-fail-on-widen failure wrote the plan file (stat: %v)", err)
	}
	f.mustRun(ExitChanges, "plan", "-detailed-exitcode", dir)
}

func TestPlanAgainstDirectory(t *testing.T) {
	f := newFixture(t)
	base := t.TempDir()
	oldDir := f.writeConfig(filepath.Join(base, "old"), specOptions{})
	newDir := f.writeConfig(filepath.Join(base, "new"), specOptions{allow: []string{"api.example.com", "uploads.example.com"}})
	f.mustRun(ExitOK, "lock", oldDir)
	f.mustRun(ExitOK, "lock", newDir)

	r := f.mustRun(ExitChanges, "plan", "-against", oldDir, "-detailed-exitcode", newDir)
	if !strings.Contains(r.stdout, "uploads.example.com") || !strings.Contains(r.stdout, oldDir) {
		t.Errorf("plan -against does not show the added host against %s:\n%s", oldDir, r)
	}
	if strings.Contains(r.stdout, "image.box") {
		t.Errorf("plan -against shows an unchanged image:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(newDir, ".sbx")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("plan -against touched state (stat: %v)", err)
	}
	f.mustRun(ExitError, "plan", "-against", oldDir, "-fail-on-widen", newDir)
	f.mustRun(ExitOK, "plan", "-against", newDir, "-fail-on-widen", "-detailed-exitcode", newDir)
}

func TestPlanAgainstGitRevision(t *testing.T) {
	f := newFixture(t)
	repo := t.TempDir()
	dir := filepath.Join(repo, "sandboxes", "box")
	f.writeConfig(dir, specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	f.gitRun(repo, "init", "-q")
	f.gitRun(repo, "commit", "-q", "--allow-empty", "-m", "empty")
	f.gitRun(repo, "add", ".")
	f.gitRun(repo, "commit", "-q", "-m", "first")

	f.writeConfig(dir, specOptions{allow: []string{"api.example.com", "uploads.example.com"}})
	f.gitRun(repo, "commit", "-q", "-a", "-m", "second")

	r := f.mustRun(ExitChanges, "plan", "-against", "HEAD~1", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "uploads.example.com") || !strings.Contains(r.stdout, "HEAD~1") {
		t.Errorf("plan -against HEAD~1 does not show the added host:\n%s", r)
	}
	r = f.mustRun(ExitOK, "plan", "-against", "HEAD", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "No changes") {
		t.Errorf("plan -against HEAD shows changes:\n%s", r)
	}
	// Before the configuration existed, everything is new.
	r = f.mustRun(ExitChanges, "plan", "-against", "HEAD~2", "-detailed-exitcode", dir)
	if !strings.Contains(r.stdout, "2 to add") {
		t.Errorf("plan -against a revision without the configuration:\n%s", r)
	}
	r = f.mustRun(ExitError, "plan", "-against", "no-such-rev", dir)
	if !strings.Contains(r.stderr, "no-such-rev") {
		t.Errorf("a bad revision is not named:\n%s", r)
	}
}

func TestHelpAndUsage(t *testing.T) {
	f := &fixture{t: t}
	r := f.mustRun(ExitOK, "help")
	for _, v := range []string{"validate", "fmt", "lock", "plan", "show", "version"} {
		if !strings.Contains(r.stdout, v) {
			t.Errorf("help does not list %s:\n%s", v, r)
		}
	}
	for _, args := range [][]string{{"help", "plan"}, {"plan", "-h"}, {"plan", "--help"}} {
		r = f.mustRun(ExitOK, args...)
		if !strings.Contains(r.stdout, "-fail-on-widen") || !strings.HasPrefix(r.stdout, "Usage: sbx plan") {
			t.Errorf("sbx %s:\n%s", strings.Join(args, " "), r)
		}
	}
	for _, v := range []string{"validate", "fmt", "lock", "show", "version"} {
		r = f.mustRun(ExitOK, v, "-h")
		if !strings.HasPrefix(r.stdout, "Usage: sbx "+v) {
			t.Errorf("sbx %s -h:\n%s", v, r)
		}
	}
	r = f.mustRun(ExitError)
	if !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("no arguments:\n%s", r)
	}
	r = f.mustRun(ExitError, "frobnicate")
	if !strings.Contains(r.stderr, `Unknown command "frobnicate"`) {
		t.Errorf("unknown command:\n%s", r)
	}
	r = f.mustRun(ExitError, "plan", "-bogus")
	if !strings.Contains(r.stderr, "-bogus") {
		t.Errorf("unknown flag:\n%s", r)
	}
	r = f.mustRun(ExitError, "lock", "-lockfile=sometimes")
	if !strings.Contains(r.stderr, "readonly") {
		t.Errorf("bad -lockfile mode:\n%s", r)
	}
	r = f.mustRun(ExitOK, "version")
	if !strings.HasPrefix(r.stdout, "sbx ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("version:\n%s", r)
	}
}

// panicWriter panics on every write, standing in for a bug.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("boom") }

func TestPanicBecomesInternalError(t *testing.T) {
	var stderr bytes.Buffer
	code := Run([]string{"version"}, &Env{Stdout: panicWriter{}, Stderr: &stderr})
	if code != ExitError {
		t.Errorf("exit %d, want %d", code, ExitError)
	}
	if !strings.HasPrefix(stderr.String(), "Error: Internal error\n\n") || !strings.Contains(stderr.String(), "boom") {
		t.Errorf("stderr: %q", stderr.String())
	}
	if strings.Contains(stderr.String(), "goroutine") {
		t.Errorf("a stack trace was printed without SBX_TRACEBACK:\n%s", stderr.String())
	}
}

func TestInterspersedFlags(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	out := filepath.Join(t.TempDir(), "p.plan")
	f.mustRun(ExitChanges, "plan", dir, "-out", out, "-detailed-exitcode")
	if _, err := os.Stat(out); err != nil {
		t.Errorf("flags after the directory were ignored: %v", err)
	}
	r := f.mustRun(ExitError, "plan", dir, dir)
	if !strings.Contains(r.stderr, "at most one directory") {
		t.Errorf("two directories:\n%s", r)
	}
}

// TestApplyStalePlanNamesDir checks that apply -plan with a plan the
// configuration no longer matches says to plan again with the
// configuration directory, as a command that runs as printed. It is
// refused before anything is built or started.
func TestApplyStalePlanNamesDir(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	out := filepath.Join(t.TempDir(), "box.plan")
	f.mustRun(ExitOK, "plan", "-out", out, dir)
	f.writeConfig(dir, specOptions{cpus: 2})
	r := f.mustRun(ExitError, "apply", "-plan", out, dir)
	want := fmt.Sprintf(`Run "sbx plan -out %s %s" again`, out, dir)
	if !strings.Contains(r.stderr, "The saved plan is out of date") || !strings.Contains(r.stderr, want) {
		t.Errorf("apply -plan with a stale plan does not say %q:\n%s", want, r)
	}
}

// TestApplyLockTimeoutNamed checks that an apply that waited out
// -lock-timeout for another run's state lock names the holder and the
// option that waits longer, not Go's "context deadline exceeded". It
// fails before anything is built or started.
func TestApplyLockTimeoutNamed(t *testing.T) {
	f := newFixture(t)
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	lease, err := state.Lock(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	r := f.mustRun(ExitError, "apply", "-auto-approve", "-lock-timeout=100ms", dir)
	for _, want := range []string{"Cannot lock the state", fmt.Sprintf("(pid %d)", os.Getpid()), "within -lock-timeout (100ms)", "-lock-timeout=5m"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply while the state is locked does not say %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.stderr, "deadline exceeded") {
		t.Errorf("apply while the state is locked ends in Go's error:\n%s", r)
	}
}

// countingTransport counts the requests it passes on.
type countingTransport struct {
	n  atomic.Int64
	rt http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestReadonlyLockListsWhatDiffersUnresolved checks that lock
// -lockfile=readonly, when the new pin cannot be resolved (the version
// does not exist, or the host is unreachable), still says which inputs
// the lock file no longer matches, and that plan -lockfile=readonly on
// the same checkout sends no request at all.
func TestReadonlyLockListsWhatDiffersUnresolved(t *testing.T) {
	f := newFixture(t)
	ct := &countingTransport{rt: f.client.Transport}
	f.client.Transport = ct
	dir := f.writeConfig(t.TempDir(), specOptions{})
	f.mustRun(ExitOK, "lock", dir)
	lockPath := filepath.Join(dir, lockfiles.FileName)
	before := readFile(t, lockPath)
	f.writeConfig(dir, specOptions{toolVersion: "9.9.9", baseTag: "v9"})

	r := f.mustRun(ExitError, "lock", "-lockfile=readonly", dir)
	for _, want := range []string{
		lockPath + " is not up to date",
		`artifact.tool is locked for source "npm:@acme/tool@1.0.0" but the spec declares "npm:@acme/tool@9.9.9"`,
		"base is locked for source",
		"test/base:v9",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("lock -lockfile=readonly with an unresolvable pin does not say %q:\n%s", want, r)
		}
	}
	if !bytes.Equal(readFile(t, lockPath), before) {
		t.Error("lock -lockfile=readonly changed the lock file")
	}

	ct.n.Store(0)
	r = f.mustRun(ExitError, "plan", "-lockfile=readonly", dir)
	if !strings.Contains(r.stderr, "is not up to date") {
		t.Errorf("plan -lockfile=readonly with a stale lock:\n%s", r)
	}
	if n := ct.n.Load(); n != 0 {
		t.Errorf("plan -lockfile=readonly sent %d requests", n)
	}
}
