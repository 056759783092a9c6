package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// testInputHash hashes the platform and every pin, so that a changed pin
// changes the hash.
func testInputHash(img *lang.Image, pins map[string]*lockfiles.Pin) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, img.Platform.String())
	keys := sortedKeys(pins)
	for _, k := range keys {
		fmt.Fprintf(h, "%s %+v\n", k, *pins[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func rng(line int) hcl.Range {
	return hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: line, Column: 3, Byte: 10 * line}, End: hcl.Pos{Line: line, Column: 40, Byte: 10*line + 37}}
}

type lockFixture struct {
	oci     *ociFixture
	npm     *fakeNPM
	files   *requestLog
	fileURL string
	dir     string
	set     *Set
}

func newLockFixture(t *testing.T) *lockFixture {
	t.Helper()
	f := &lockFixture{oci: newOCIFixture(t), npm: newFakeNPM(t, "/")}
	for _, v := range []string{"1.0.0", "1.2.0"} {
		f.npm.publish("tool", v, &npmVersion{})
	}
	srv, log := fileServer(t, map[string][]byte{"/vmlinuz": []byte("kernel")})
	f.files = log
	f.fileURL = srv.URL + "/vmlinuz"
	f.dir = t.TempDir()
	writeFile(t, filepath.Join(f.dir, "motd"), "welcome\n")
	f.set = New(Options{
		Dir:        f.dir,
		Environ:    isolatedEnv(t, "NPM_CONFIG_REGISTRY="+f.npm.registry()),
		HTTPClient: tlsClient(t, f.npm.srv, srv),
		Keychain:   anonymous{},
		InputHash:  testInputHash,
	})
	return f
}

func (f *lockFixture) config() *lang.Config {
	base := f.oci.source("test/multi:latest")
	base.Range = rng(2)
	single := f.oci.source("test/single:1")
	single.Range = rng(20)
	tool := npmSource("npm:tool@^1.0.0")
	tool.Range = rng(5)
	return &lang.Config{
		Dir: f.dir,
		Images: map[string]*lang.Image{
			"agent": {
				Name:     "agent",
				Platform: linuxAMD64,
				Base:     base,
				Kernel:   &lang.Kernel{Source: urlSource(f.fileURL, "")},
				Artifacts: []*lang.Artifact{
					{Name: "tool", Source: tool, Dest: "/usr/local/bin/tool"},
					{Name: "motd", Source: &lang.Source{Kind: lang.SourceFile, Raw: "file:motd", Ref: "motd", Range: rng(8)}, Dest: "/etc/motd"},
				},
				DeclRange: rng(1),
			},
			"worker": {Name: "worker", Platform: linuxAMD64, Base: single, DeclRange: rng(19)},
		},
	}
}

// requests is the number of requests every server has received.
func (f *lockFixture) requests() int {
	return f.oci.log.count() + f.npm.log.count() + f.files.count()
}

func changeKeys(cs []LockChange) []string {
	var out []string
	for _, c := range cs {
		s := c.Image + "." + c.Key
		switch {
		case c.Old == nil:
			s = "+" + s
		case c.New == nil:
			s = "-" + s
		default:
			s = "~" + s
		}
		out = append(out, s)
	}
	return out
}

func mustLock(t *testing.T, f *lockFixture, cfg *lang.Config, old *lockfiles.Lock, upgrade bool) (*lockfiles.Lock, []LockChange) {
	t.Helper()
	l, changes, diags := f.set.Lock(context.Background(), cfg, old, upgrade)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return l, changes
}

func TestLockFromNothing(t *testing.T) {
	f := newLockFixture(t)
	l, changes := mustLock(t, f, f.config(), nil, false)

	agent := l.Images["agent"]
	if agent == nil || l.Images["worker"] == nil || len(l.Images) != 2 {
		t.Fatalf("images = %v", l.Images)
	}
	if agent.Platform != "linux/amd64" || !strings.HasPrefix(agent.InputHash, "sha256:") || agent.Outputs != nil {
		t.Errorf("agent = %+v", agent)
	}
	want := map[string]lockfiles.Pin{
		"base":          {Source: f.oci.host + "/test/multi:latest", Kind: "oci", Digest: digestOf(t, f.oci.index), Manifest: digestOf(t, f.oci.amd64)},
		"kernel":        {Source: f.fileURL, Kind: "url", SHA256: sha256Hex([]byte("kernel"))},
		"artifact.tool": {Source: "npm:tool@^1.0.0", Kind: "npm", Version: "1.2.0", Integrity: sri512(f.npm.packages["tool"]["1.2.0"].tgz), SHA256: sha256Hex(f.npm.packages["tool"]["1.2.0"].tgz)},
		"artifact.motd": {Source: "file:motd", Kind: "file", SHA256: sha256Hex([]byte("welcome\n"))},
	}
	if len(agent.Inputs) != len(want) {
		t.Errorf("agent inputs = %v", agent.Inputs)
	}
	for k, w := range want {
		if p := agent.Inputs[k]; p == nil || *p != w {
			t.Errorf("%s = %+v\nwant %+v", k, p, w)
		}
	}
	got := strings.Join(changeKeys(changes), " ")
	if got != "+agent.artifact.motd +agent.artifact.tool +agent.base +agent.kernel +worker.base" {
		t.Errorf("changes = %s", got)
	}
}

func TestLockReusesPinsWithoutNetwork(t *testing.T) {
	f := newLockFixture(t)
	first, _ := mustLock(t, f, f.config(), nil, false)
	first.Images["agent"].Outputs = map[string]string{"disk": "sha256:" + strings.Repeat("d", 64)}

	// A newer version appears; the lock keeps what it has.
	f.npm.publish("tool", "1.9.0", &npmVersion{})
	before := f.requests()
	second, changes := mustLock(t, f, f.config(), first, false)
	if n := f.requests() - before; n != 0 {
		t.Errorf("%d requests reached the servers, want 0", n)
	}
	if len(changes) != 0 {
		t.Errorf("changes = %v", changeKeys(changes))
	}
	if !second.Equal(first) {
		t.Errorf("lock changed:\n%+v\n%+v", second.Images["agent"], first.Images["agent"])
	}

	// upgrade resolves everything again and drops stale outputs.
	third, changes := mustLock(t, f, f.config(), second, true)
	if f.npm.log.count() == 0 || f.requests() == before {
		t.Errorf("upgrade made no requests")
	}
	if got := strings.Join(changeKeys(changes), " "); got != "~agent.artifact.tool" {
		t.Errorf("changes = %s", got)
	}
	if changes[0].Old.Version != "1.2.0" || changes[0].New.Version != "1.9.0" {
		t.Errorf("change = %+v → %+v", changes[0].Old, changes[0].New)
	}
	if third.Images["agent"].Outputs != nil || third.Images["agent"].InputHash == second.Images["agent"].InputHash {
		t.Errorf("outputs kept across an input change: %+v", third.Images["agent"])
	}
}

func TestLockChangedSourceResolvesAgain(t *testing.T) {
	f := newLockFixture(t)
	cfg := f.config()
	first, _ := mustLock(t, f, cfg, nil, false)
	first.Images["worker"].Outputs = map[string]string{"disk": "sha256:" + strings.Repeat("e", 64)}

	cfg.Images["agent"].Artifacts[0].Source = npmSource("npm:tool@1.0.0")
	ociBefore, urlBefore, npmBefore := f.oci.log.count(), f.files.count(), f.npm.log.count()
	second, changes := mustLock(t, f, cfg, first, false)
	if f.oci.log.count() != ociBefore || f.files.count() != urlBefore {
		t.Errorf("unchanged remote sources were fetched again")
	}
	if f.npm.log.count() == npmBefore {
		t.Errorf("the changed source was not resolved")
	}
	if got := strings.Join(changeKeys(changes), " "); got != "~agent.artifact.tool" {
		t.Errorf("changes = %s", got)
	}
	if p := second.Images["agent"].Inputs["artifact.tool"]; p.Version != "1.0.0" || p.Source != "npm:tool@1.0.0" {
		t.Errorf("pin = %+v", p)
	}
	// The untouched image keeps its outputs.
	if second.Images["worker"].Outputs["disk"] != first.Images["worker"].Outputs["disk"] {
		t.Errorf("worker lost its outputs")
	}

	// A local file is read again every time.
	writeFile(t, filepath.Join(f.dir, "motd"), "changed\n")
	_, changes = mustLock(t, f, cfg, second, false)
	if got := strings.Join(changeKeys(changes), " "); got != "~agent.artifact.motd" || changes[0].New.SHA256 != sha256Hex([]byte("changed\n")) {
		t.Errorf("changes = %s", got)
	}
}

func TestLockDropsRemovedImagesAndInputs(t *testing.T) {
	f := newLockFixture(t)
	cfg := f.config()
	first, _ := mustLock(t, f, cfg, nil, false)

	delete(cfg.Images, "worker")
	cfg.Images["agent"].Kernel = nil
	second, changes := mustLock(t, f, cfg, first, false)
	if _, ok := second.Images["worker"]; ok || len(second.Images) != 1 {
		t.Errorf("images = %v", second.Images)
	}
	if _, ok := second.Images["agent"].Inputs["kernel"]; ok {
		t.Errorf("the kernel pin was kept")
	}
	if got := strings.Join(changeKeys(changes), " "); got != "-agent.kernel -worker.base" {
		t.Errorf("changes = %s", got)
	}
	for _, c := range changes {
		if c.Old == nil || c.New != nil {
			t.Errorf("change %+v", c)
		}
	}
}

func TestLockPlatformAndDeclaredHash(t *testing.T) {
	f := newLockFixture(t)
	cfg := f.config()
	first, _ := mustLock(t, f, cfg, nil, false)

	// A new platform needs the index entry for it.
	cfg.Images["agent"].Platform = lang.Platform{OS: "linux", Architecture: "arm64"}
	second, changes := mustLock(t, f, cfg, first, false)
	if p := second.Images["agent"].Inputs["base"]; p.Manifest != digestOf(t, f.oci.arm64) {
		t.Errorf("base = %+v", p)
	}
	if got := strings.Join(changeKeys(changes), " "); got != "~agent.base" {
		t.Errorf("changes = %s", got)
	}

	// Declaring the hash already pinned changes nothing and fetches nothing.
	kernel := cfg.Images["agent"].Kernel.Source
	kernel.SHA256 = sha256Hex([]byte("kernel"))
	before := f.files.count()
	if _, changes := mustLock(t, f, cfg, second, false); len(changes) != 0 || f.files.count() != before {
		t.Errorf("changes = %v, %d requests", changeKeys(changes), f.files.count()-before)
	}
	// Declaring another hash is checked against the server.
	kernel.SHA256 = sha256Hex([]byte("another kernel"))
	kernel.Range = rng(12)
	l, _, diags := f.set.Lock(context.Background(), cfg, second, false)
	if len(diags) != 1 || diags[0].Subject == nil || *diags[0].Subject != rng(12) || !strings.Contains(diags[0].Detail, "sha256 mismatch") {
		t.Fatalf("diags = %v", diags)
	}
	if l.Images["agent"].InputHash != "" {
		t.Errorf("an image with a failed input has an input hash")
	}
}

func TestLockDiagnosticsPointAtSources(t *testing.T) {
	f := newLockFixture(t)
	cfg := f.config()
	missing := npmSource("npm:no-such-package@1.0.0")
	missing.Range = rng(30)
	cfg.Images["agent"].Artifacts[0].Source = missing
	badRef := f.oci.source("test/nothing:1")
	badRef.Range = rng(40)
	cfg.Images["worker"].Base = badRef

	l, _, diags := f.set.Lock(context.Background(), cfg, nil, false)
	if len(diags) != 2 {
		t.Fatalf("diags = %v", diags)
	}
	sort.Slice(diags, func(i, j int) bool { return diags[i].Subject.Start.Line < diags[j].Subject.Start.Line })
	for i, want := range []struct {
		line int
		text string
	}{{30, "artifact.tool of image.agent: npm:no-such-package@1.0.0"}, {40, "base of image.worker: " + badRef.Raw}} {
		d := diags[i]
		if d.Severity != hcl.DiagError || d.Subject.Start.Line != want.line || !strings.Contains(d.Detail, want.text) {
			t.Errorf("diag %d = %s: %s at %v", i, d.Summary, d.Detail, d.Subject)
		}
	}
	// What did resolve is still there.
	if l.Images["agent"].Inputs["base"] == nil || l.Images["agent"].Inputs["artifact.tool"] != nil {
		t.Errorf("partial lock = %v", l.Images["agent"].Inputs)
	}
}

func TestLockSharedSourceResolvedOnce(t *testing.T) {
	f := newLockFixture(t)
	cfg := f.config()
	cfg.Images["worker"].Base = f.oci.source("test/multi:latest")
	before := f.oci.log.count()
	l, _ := mustLock(t, f, cfg, nil, false)
	perResolve := f.oci.log.count() - before
	if *l.Images["worker"].Inputs["base"] != *l.Images["agent"].Inputs["base"] {
		t.Errorf("shared base pinned differently")
	}
	// One resolution costs the same as resolving the one source alone.
	before = f.oci.log.count()
	if _, err := f.set.Resolve(context.Background(), f.oci.source("test/multi:latest"), linuxAMD64); err != nil {
		t.Fatal(err)
	}
	if alone := f.oci.log.count() - before; perResolve != alone {
		t.Errorf("locking made %d registry requests, one resolution makes %d", perResolve, alone)
	}
}

func TestLockInterrupted(t *testing.T) {
	f := newLockFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, diags := f.set.Lock(ctx, f.config(), nil, false)
	if len(diags) != 1 || diags[0].Summary != "Locking interrupted" {
		t.Errorf("diags = %v", diags)
	}
}

func TestLockDefaultInputHash(t *testing.T) {
	f := newLockFixture(t)
	srvClient := f.set.resolvers[lang.SourceURL].(*urlResolver).client
	f.set = New(Options{
		Dir:        f.dir,
		Environ:    isolatedEnv(t, "NPM_CONFIG_REGISTRY="+f.npm.registry()),
		HTTPClient: srvClient,
		Keychain:   anonymous{},
	})
	cfg := f.config()
	first, _ := mustLock(t, f, cfg, nil, false)
	want, err := recipe.InputHash(cfg.Images["agent"], first.Images["agent"].Inputs)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Images["agent"].InputHash; got != want {
		t.Errorf("input hash = %s, want recipe.InputHash's %s", got, want)
	}
	first.Images["agent"].Outputs = map[string]string{"disk": "sha256:" + strings.Repeat("f", 64)}
	second, _ := mustLock(t, f, cfg, first, false)
	if !second.Equal(first) {
		t.Errorf("relocking an unchanged configuration changed the lock")
	}
}
