package state

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// sample has resources out of order, set by Addr only, with every kind of
// attribute and policy rule.
func sample() *State {
	return &State{
		Resources: []*Resource{
			{
				Addr: addrs.SandboxRef("eval"),
				Sandbox: &SandboxAttrs{
					Image:     "agent",
					ImageHash: "sha256:" + strings.Repeat("a", 64),
					CPUs:      2,
					Memory:    2 << 30,
					User:      "agent",
					Env:       map[string]string{"B": "2", "A": "1"},
					Policy: policy.Sandbox{
						Allow:   []policy.AllowRule{{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: policy.Origin{Block: "egress.llm", File: "main.hcl", Line: 12}}, {Pattern: policy.MustHostPattern("*.openai.com")}},
						TCP:     []policy.TCPRule{{Dest: policy.HostPort{Host: "github.com", Port: 22}}},
						Hosts:   []policy.HostMapping{{Name: "api.test", Addr: "127.0.0.1:8443"}},
						Secrets: []policy.SecretBinding{{Name: "claude_oauth", Env: "CLAUDE_CODE_OAUTH_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")}, Source: "env:CLAUDE_CODE_OAUTH_TOKEN"}},
						Mounts:  []policy.Mount{{Guest: "/workspace", Host: ".", Access: policy.ReadWrite, Hide: []string{".env"}, ReadOnly: []string{".git/hooks"}, Tmpfs: []string{"node_modules"}, Owner: "agent"}},
					},
					PolicyHash: "sha256:" + strings.Repeat("b", 64),
				},
			},
			{
				Addr: addrs.ImageRef("agent"),
				Image: &ImageAttrs{
					Platform:  "linux/amd64",
					InputHash: "sha256:" + strings.Repeat("c", 64),
					Inputs:    map[string]string{"base": "registry.example.com/library/alpine:3.23", "artifact.claude": "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3"},
					Outputs:   map[string]string{"disk": "sha256:" + strings.Repeat("d", 64)},
				},
			},
			{Addr: addrs.ImageRef("base"), Image: &ImageAttrs{Platform: "linux/arm64", InputHash: "sha256:" + strings.Repeat("e", 64)}},
		},
	}
}

func lock(t *testing.T, dir string) *Lease {
	t.Helper()
	l, err := Lock(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLoadAbsent(t *testing.T) {
	s, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&State{FormatVersion: FormatVersion}, s); diff != "" {
		t.Errorf("Load of an absent state (-want +got):\n%s", diff)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := lock(t, dir)
	s := sample()
	if err := l.Save(s); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 1 || s.FormatVersion != FormatVersion {
		t.Errorf("after the first Save: serial %d, version %d", s.Serial, s.FormatVersion)
	}
	id, err := uuid.Parse(s.Lineage)
	if err != nil || id.Version() != 4 {
		t.Errorf("lineage %q is not a UUID v4", s.Lineage)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	want.FormatVersion, want.Lineage, want.Serial = FormatVersion, s.Lineage, 1
	want.Resources = []*Resource{want.Resources[1], want.Resources[2], want.Resources[0]}
	for _, r := range want.Resources {
		r.Address = r.Addr.String()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load after Save (-want +got):\n%s", diff)
	}
	if got.Lookup(addrs.SandboxRef("eval")) == nil || got.Lookup(addrs.SandboxRef("agent")) != nil {
		t.Errorf("Lookup does not find resources by kind and name")
	}

	// The file is exactly Marshal of what was loaded, and private.
	data, err := os.ReadFile(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Errorf("Marshal(Load) differs from the file:\n%s", cmp.Diff(string(data), string(again)))
	}
	if fi, _ := os.Stat(Path(dir)); fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}

	// A second save keeps the lineage and bumps the serial.
	lineage := got.Lineage
	got.Resources = got.Resources[:1]
	if err := l.Save(got); err != nil {
		t.Fatal(err)
	}
	if got.Lineage != lineage || got.Serial != 2 {
		t.Errorf("second Save: lineage %s serial %d, want %s and 2", got.Lineage, got.Serial, lineage)
	}
	if back, err := l.Load(); err != nil || len(back.Resources) != 1 || back.Serial != 2 {
		t.Errorf("Lease.Load = %v, %v", back, err)
	}
	// The backup holds the state before the second save, as it was.
	if backup, err := os.ReadFile(filepath.Join(dir, Dir, BackupFileName)); err != nil || !bytes.Equal(backup, data) {
		t.Errorf("the backup after the second save holds %q, %v; want the first state:\n%s", backup, err, data)
	}
	assertOnly(t, filepath.Join(dir, Dir), FileName, BackupFileName, LockFileName)
}

func TestMarshalGolden(t *testing.T) {
	s := sample()
	s.Lineage = "6f1c2a9e-3b5d-4e8f-9a7b-0c1d2e3f4a5b"
	s.Serial = 7
	got, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "state.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./state -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal differs from %s (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
	// Declaration order of resources does not matter.
	r := sample()
	r.Lineage, r.Serial = s.Lineage, s.Serial
	r.Resources = []*Resource{r.Resources[2], r.Resources[0], r.Resources[1]}
	if other, _ := Marshal(r); !bytes.Equal(other, got) {
		t.Errorf("resource order changes the bytes")
	}
	// Marshal does not touch its argument.
	if diff := cmp.Diff(sample().Resources, s.Resources); diff != "" {
		t.Errorf("Marshal modified the state:\n%s", diff)
	}
}

func TestMarshalInvalid(t *testing.T) {
	img := &ImageAttrs{Platform: "linux/amd64"}
	sbx := &SandboxAttrs{Image: "agent"}
	for name, s := range map[string]*State{
		"image without attributes":  {Resources: []*Resource{{Addr: addrs.ImageRef("a")}}},
		"image with sandbox attrs":  {Resources: []*Resource{{Addr: addrs.ImageRef("a"), Image: img, Sandbox: sbx}}},
		"sandbox with image attrs":  {Resources: []*Resource{{Addr: addrs.SandboxRef("a"), Image: img}}},
		"unmanaged kind":            {Resources: []*Resource{{Address: "egress.llm", Image: img}}},
		"duplicate":                 {Resources: []*Resource{{Addr: addrs.ImageRef("a"), Image: img}, {Address: "image.a", Image: img}}},
		"address and addr disagree": {Resources: []*Resource{{Addr: addrs.ImageRef("a"), Address: "image.b", Image: img}}},
		"no address":                {Resources: []*Resource{{Image: img}}},
		"nil resource":              {Resources: []*Resource{nil}},
		"invalid name":              {Resources: []*Resource{{Addr: addrs.Ref{Kind: addrs.Image, Name: "a b"}, Image: img}}},
		"future format version":     {FormatVersion: FormatVersion + 1},
	} {
		if _, err := Marshal(s); err == nil {
			t.Errorf("%s: Marshal accepted it", name)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	lineage := `"lineage": "6f1c2a9e-3b5d-4e8f-9a7b-0c1d2e3f4a5b"`
	for _, tc := range []struct {
		name, content, want string
	}{
		{"corrupt", "{\n  \"format_version\": 1,\n  \"lineage\": \n}", "state.json:4:1 is not valid"},
		{"truncated", "{\n  \"format_version\": 1,\n", "is not valid"},
		{"not an object", "[]", "is not valid"},
		{"wrong type", "{\"format_version\": 1, " + lineage + ", \"serial\": \"one\"}", "state.json:1:"},
		{"unknown version", "{\"format_version\": 2, " + lineage + "}", "has format version 2; this sbx reads version 1"},
		{"no version", "{" + lineage + "}", "has no format_version"},
		{"unknown field", "{\"format_version\": 1, " + lineage + ", \"modules\": {}}", `unknown field "modules"`},
		{"null output", "{\"format_version\": 1, " + lineage + ", \"outputs\": {\"url\": null}}", "output url has no value"},
		{"output without value", "{\"format_version\": 1, " + lineage + ", \"outputs\": {\"url\": {\"sensitive\": true}}}", "output url has no value"},
		{"bad output name", "{\"format_version\": 1, " + lineage + ", \"outputs\": {\"a b\": {\"value\": 1}}}", `output "a b": not a valid name`},
		{"trailing data", "{\"format_version\": 1, " + lineage + "} {}", "state.json:1:74 is not valid"},
		{"no lineage", "{\"format_version\": 1, \"serial\": 3}", "has no lineage"},
		{"bad lineage", "{\"format_version\": 1, \"lineage\": \"x\"}", `lineage "x" is not a UUID`},
		{"bad address", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"image\", \"image\": {}}]}", "invalid address"},
		{"unmanaged kind", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"secret.x\", \"image\": {}}]}", "only images and sandboxes"},
		{"kind mismatch", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"sandbox.x\", \"image\": {}}]}", "must have sandbox attributes"},
		{"duplicate", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"image.x\", \"image\": {}}, {\"address\": \"image.x\", \"image\": {}}]}", "recorded more than once"},
		{"allow rule without pattern", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"sandbox.x\", \"sandbox\": {\"policy\": {\"allow\": [{}]}}}]}", "allow rule 0 has no host pattern"},
		{"tcp rule without destination", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"sandbox.x\", \"sandbox\": {\"policy\": {\"tcp\": [{\"dest\": null}]}}}]}", "tcp rule 0 has no destination"},
		{"null secret host", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"sandbox.x\", \"sandbox\": {\"policy\": {\"secrets\": [{\"name\": \"t\", \"hosts\": [null]}]}}}]}", `secret "t": host 0 is empty`},
		{"bad host pattern", "{\"format_version\": 1, " + lineage + ", \"resources\": [{\"address\": \"sandbox.x\", \"sandbox\": {\"policy\": {\"allow\": [{\"pattern\": \"*\"}]}}}]}", "allows every host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, Dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(Path(dir), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Load(dir)
			if err == nil {
				t.Fatalf("Load accepted it: %+v", s)
			}
			if !strings.Contains(err.Error(), Path(dir)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to name %s and contain %q", err, Path(dir), tc.want)
			}
		})
	}
}

func TestLockExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := Lock(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	second, err := Lock(ctx, dir)
	if err == nil {
		second.Close()
		t.Fatal("a second Lock succeeded while the first was held")
	}
	want := fmt.Sprintf("another sbx process (pid %d) holds the state lock %s", os.Getpid(), filepath.Join(dir, Dir, LockFileName))
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}

	// Once the first is released, a waiting Lock gets it.
	go func() {
		time.Sleep(100 * time.Millisecond)
		first.Close()
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	third, err := Lock(ctx, dir)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("Lock did not wait for the holder")
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
	if err := third.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := third.Save(sample()); err == nil {
		t.Errorf("Save through a released lease succeeded")
	}
}

// holdLockEnv names the directory a re-executed test binary locks; see
// TestLockAcrossProcesses.
const holdLockEnv = "SBX_TEST_HOLD_STATE_LOCK"

// TestMain lets the test binary act as a second sbx process: with
// holdLockEnv set it takes the state lock, says "locked", and holds it
// until its standard input closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv(holdLockEnv); dir != "" {
		l, err := Lock(context.Background(), dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n')
		l.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child: %q, %v", line, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l, err := Lock(ctx, dir)
	if err == nil {
		l.Close()
		t.Fatal("Lock succeeded while another process held it")
	}
	want := "another sbx process (pid " + strconv.Itoa(cmd.Process.Pid) + ") holds the state lock"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}

	// The child releases; the parent gets the lock.
	stdin.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err = Lock(ctx, dir)
	if err != nil {
		t.Fatalf("Lock after the child released it: %v", err)
	}
	l.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
}

func TestLockReleasedWhenHolderDies(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+dir)
	if _, err := cmd.StdinPipe(); err != nil { // kept open: the child holds on
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("child: %q", line)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Lock(ctx, dir)
	if err != nil {
		t.Fatalf("the lock of a killed process was not released: %v", err)
	}
	l.Close()
}

func TestSaveRefusesOtherLineage(t *testing.T) {
	dir := t.TempDir()
	l := lock(t, dir)
	if err := l.Save(sample()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(Path(dir))

	other := sample()
	other.Lineage = uuid.NewString()
	other.Serial = 99
	err := l.Save(other)
	if err == nil || !strings.Contains(err.Error(), "refusing to save state") || !strings.Contains(err.Error(), other.Lineage) {
		t.Errorf("Save of another lineage: %v", err)
	}
	if other.Serial != 99 {
		t.Errorf("a refused Save changed the state's serial")
	}

	// A fresh state (no lineage) must not replace an existing one either.
	fresh := sample()
	if err := l.Save(fresh); err == nil || !strings.Contains(err.Error(), "lineage none") {
		t.Errorf("Save of a new state over an existing one: %v", err)
	}
	if fresh.Lineage != "" || fresh.Serial != 0 {
		t.Errorf("a refused Save changed the state")
	}
	after, _ := os.ReadFile(Path(dir))
	if !bytes.Equal(before, after) {
		t.Errorf("a refused Save changed the file")
	}
}

func TestSaveRefusesStale(t *testing.T) {
	dir := t.TempDir()
	l := lock(t, dir)
	if err := l.Save(sample()); err != nil {
		t.Fatal(err)
	}
	a, _ := Load(dir)
	b, _ := Load(dir)
	if err := l.Save(a); err != nil { // serial 1 → 2
		t.Fatal(err)
	}
	err := l.Save(b) // read at serial 1
	if err == nil || !strings.Contains(err.Error(), "stale") || !strings.Contains(err.Error(), "serial 2") {
		t.Errorf("Save of a stale state: %v", err)
	}
	if s, _ := Load(dir); s.Serial != 2 {
		t.Errorf("serial on disk %d, want 2", s.Serial)
	}
}

func TestSaveRefusesCorruptState(t *testing.T) {
	dir := t.TempDir()
	l := lock(t, dir)
	if err := os.WriteFile(Path(dir), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(sample()); err == nil || !strings.Contains(err.Error(), Path(dir)) {
		t.Errorf("Save over a corrupt state: %v", err)
	}
	if data, _ := os.ReadFile(Path(dir)); string(data) != "{" {
		t.Errorf("a corrupt state was overwritten")
	}
}

func TestSaveInvalidLeavesFile(t *testing.T) {
	dir := t.TempDir()
	l := lock(t, dir)
	s := sample()
	if err := l.Save(s); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(Path(dir))
	s.Resources = append(s.Resources, &Resource{Addr: addrs.ImageRef("agent"), Image: &ImageAttrs{}})
	if err := l.Save(s); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("Save with a duplicate resource: %v", err)
	}
	if s.Serial != 1 {
		t.Errorf("a failed Save changed the serial to %d", s.Serial)
	}
	after, _ := os.ReadFile(Path(dir))
	if !bytes.Equal(before, after) {
		t.Errorf("a failed Save changed the file")
	}
	assertOnly(t, filepath.Join(dir, Dir), FileName, LockFileName)
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff(names, got); diff != "" {
		t.Errorf("%s holds other files (-want +got):\n%s", dir, diff)
	}
}

// TestOutputsRoundTrip checks that outputs are saved and read back as
// they were, and that a state without them has no "outputs" key.
func TestOutputsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := lock(t, dir)
	s := sample()
	if err := l.Save(s); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["outputs"]; ok {
		t.Errorf("a state without outputs has the key:\n%s", data)
	}
	s.Outputs = map[string]*Output{
		"url":   {Value: []byte(`"https://example.test"`)},
		"token": {Value: []byte(`{"a": [1, 2.5, true]}`), Sensitive: true},
	}
	if err := l.Save(s); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Outputs) != 2 || string(got.Outputs["url"].Value) != `"https://example.test"` || got.Outputs["url"].Sensitive || !got.Outputs["token"].Sensitive {
		t.Fatalf("outputs read back: %+v", got.Outputs)
	}
	var v map[string][]any
	if err := json.Unmarshal(got.Outputs["token"].Value, &v); err != nil || len(v["a"]) != 3 {
		t.Errorf("token's value read back as %s (%v)", got.Outputs["token"].Value, err)
	}
	if _, err := Marshal(&State{Outputs: map[string]*Output{"x": nil}}); err == nil {
		t.Error("Marshal accepted an output without a value")
	}
}
