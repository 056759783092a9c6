package operation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
)

// recorder is Hooks that writes down what an operation reported.
type recorder struct {
	mu        sync.Mutex
	messages  []string
	shown     []*plan.Plan
	asked     []string
	approve   bool
	events    []apply.Event
	applied   int
	appliedOK bool
	outputs   []map[string]*state.Output
}

func (r *recorder) Message(line string) {
	r.mu.Lock()
	r.messages = append(r.messages, line)
	r.mu.Unlock()
}
func (r *recorder) ShowPlan(p *plan.Plan) error {
	r.shown = append(r.shown, p)
	return nil
}
func (r *recorder) Confirm(_ context.Context, q, _ string) bool {
	r.asked = append(r.asked, q)
	return r.approve
}
func (r *recorder) Progress(e apply.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}
func (r *recorder) Applied(_ apply.Result, err error) {
	r.applied++
	r.appliedOK = err == nil
}

func (r *recorder) Outputs(outs map[string]*state.Output) {
	r.outputs = append(r.outputs, outs)
}

var _ Hooks = (*recorder)(nil)

func TestDestroyPlan(t *testing.T) {
	st := &state.State{Lineage: "L", Serial: 3, Resources: []*state.Resource{
		{Addr: addrs.ImageRef("base")},
		{Addr: addrs.SandboxRef("web"), Sandbox: &state.SandboxAttrs{}},
	}}
	found := []supervisor.Entry{
		{Name: "web"}, // recorded: the state's entry wins
		{Name: "left", Liveness: supervisor.Liveness{Gone: "its supervisor (pid 41) has exited"}},
		{Name: "runs", Liveness: supervisor.Liveness{Running: true}},
	}
	p, ds := DestroyPlan(st, found, nil, false)
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	var got []string
	for _, c := range p.Changes {
		if c.Action != plan.Delete {
			t.Errorf("%s: action %v", c.Addr, c.Action)
		}
		got = append(got, c.Addr.String()+"|"+c.Reason)
	}
	want := []string{
		"image.base|",
		"sandbox.left|it is not in the state (an apply that failed or was interrupted left it): its supervisor (pid 41) has exited",
		"sandbox.runs|it is not in the state (an apply that failed or was interrupted left it) and it runs",
		"sandbox.web|",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p.StateLineage != "L" || p.StateSerial != 3 || p.Against != "state" {
		t.Errorf("plan against %q %q %d", p.Against, p.StateLineage, p.StateSerial)
	}

	// Named: only those, each once; images stay.
	p, ds = DestroyPlan(st, found, []string{"sandbox.web", "web", "left"}, false)
	if ds.HasErrors() || len(p.Changes) != 2 || p.Changes[0].Addr.Name != "left" || p.Changes[1].Addr.Name != "web" {
		t.Errorf("named plan: %v %v", p, ds.Err())
	}

	// A name nobody knows lists those that are known.
	_, ds = DestroyPlan(st, found, []string{"nope"}, false)
	if len(ds) != 1 || ds[0].Summary != `No sandbox "nope" to destroy` ||
		ds[0].Detail != "The state records these sandboxes, or the runtime directory holds them: left, runs, web." {
		t.Errorf("unknown name: %+v", ds)
	}
	_, ds = DestroyPlan(&state.State{}, nil, []string{"nope"}, true)
	if len(ds) != 1 || ds[0].Detail != "The runtime directory holds these sandboxes of the configuration: none." {
		t.Errorf("unknown orphan: %+v", ds)
	}
}

func TestSamePlan(t *testing.T) {
	a := &plan.Plan{Against: "state", StateLineage: "L", StateSerial: 1}
	b := &plan.Plan{Against: "state", StateLineage: "L", StateSerial: 1, Mounts: []plan.MountReport{{}}}
	if err := SamePlan(a, b); err != nil {
		t.Errorf("plans differing only in mount reports: %v", err)
	}
	if b.Mounts == nil {
		t.Error("SamePlan changed its argument")
	}
	c := &plan.Plan{Against: "state", StateLineage: "L", StateSerial: 2}
	if err := SamePlan(a, c); err == nil || !strings.Contains(err.Error(), "serial 1; the state is now L serial 2") {
		t.Errorf("another serial: %v", err)
	}
	d := &plan.Plan{Against: "state", StateLineage: "L", StateSerial: 1, Changes: []*plan.ResourceChange{{Addr: addrs.SandboxRef("x"), Action: plan.Delete}}}
	if err := SamePlan(a, d); err == nil || !strings.Contains(err.Error(), "changed since it was saved") {
		t.Errorf("other changes: %v", err)
	}
	if err := SamePlan(&plan.Plan{Against: "main"}, a); err == nil || !strings.Contains(err.Error(), "compares with main") {
		t.Errorf("a plan against a revision: %v", err)
	}
}

var (
	oldDigest = "sha256:" + strings.Repeat("a", 64)
	newDigest = "sha256:" + strings.Repeat("b", 64)
)

func TestRecordOutputs(t *testing.T) {
	dir := t.TempDir()
	cfg := &lang.Config{Dir: dir}
	lock := &lockfiles.Lock{Images: map[string]*lockfiles.Image{
		"base": {Name: "base", Platform: "linux/amd64", InputHash: oldDigest, Inputs: map[string]*lockfiles.Pin{"kernel": {Source: "./vmlinuz", Kind: "file", SHA256: strings.Repeat("c", 64)}}, Outputs: map[string]string{"kernel": oldDigest}},
	}}
	res := map[string]*image.Result{"base": {Outputs: map[string]image.Output{"kernel": {Digest: newDigest}}}}

	var h recorder
	ds := RecordOutputs(&h, cfg, lock, res, true)
	if !ds.HasErrors() || !strings.Contains(ds[0].Detail, "image.base output kernel: built "+newDigest+", the lock records "+oldDigest+"") {
		t.Fatalf("read-only: %+v", ds)
	}
	if _, err := os.Stat(filepath.Join(dir, lockfiles.FileName)); !os.IsNotExist(err) {
		t.Fatalf("read-only wrote the lock file: %v", err)
	}
	ds = RecordOutputs(&h, cfg, lock, res, false)
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	written, hd := lockfiles.Read(filepath.Join(dir, lockfiles.FileName))
	if hd.HasErrors() {
		t.Fatal(hd.Error())
	}
	if got := written.Images["base"].Outputs["kernel"]; got != newDigest {
		t.Errorf("recorded %q", got)
	}
	if lock.Images["base"].Outputs["kernel"] != oldDigest {
		t.Error("RecordOutputs changed the lock it was given")
	}
	if len(h.messages) != 2 || !strings.HasPrefix(h.messages[0], "Recorded the output hashes in ") ||
		h.messages[1] != "  Warning: image.base output kernel was "+oldDigest+"; the image did not rebuild to the recorded bytes." {
		t.Errorf("messages %q", h.messages)
	}
}

func writeSpec(t *testing.T, spec string) *lang.Config {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "sbx.hcl"), []byte(spec), 0o644))
	cfg, d := lang.Load(dir, lang.Options{Environ: []string{}})
	if d.HasErrors() {
		t.Fatal(d.Error())
	}
	return cfg
}

// An apply with nothing to do takes the state lock, shows the (empty)
// plan, asks nothing and applies nothing.
func TestApplyNoChanges(t *testing.T) {
	cfg := writeSpec(t, "# nothing yet\n")
	var h recorder
	out, ds := Apply(context.Background(), ApplyRequest{Config: cfg, Lock: &lockfiles.Lock{}, RuntimeBase: t.TempDir()}, &h)
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	if out.Applied || out.Cancelled || out.Plan == nil || out.Plan.HasChanges() {
		t.Errorf("outcome %+v", out)
	}
	if len(h.messages) != 1 || h.messages[0] != "No changes. The sandboxes match the configuration." {
		t.Errorf("messages %q", h.messages)
	}
	if len(h.shown) != 1 || len(h.asked) != 0 || h.applied != 0 {
		t.Errorf("shown %d, asked %q, applied %d", len(h.shown), h.asked, h.applied)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, state.Dir)); err != nil {
		t.Errorf("apply took no state lock: %v", err)
	}
}

// Destroy of a state that records a sandbox asks first; refused, nothing
// changes. Approved, the sandbox leaves the state.
func TestDestroyConfirm(t *testing.T) {
	dir := t.TempDir()
	lease, err := state.Lock(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	st := &state.State{Resources: []*state.Resource{{Addr: addrs.ImageRef("base"), Image: &state.ImageAttrs{Platform: "linux/amd64"}}}}
	must(t, lease.Save(st))
	lease.Close()
	req := DestroyRequest{Dir: dir, RuntimeBase: t.TempDir()}

	h := &recorder{}
	out, ds := Destroy(context.Background(), req, h)
	if ds.HasErrors() || !out.Cancelled || out.Applied || len(h.asked) != 1 || h.asked[0] != "Do you really want to destroy these?" {
		t.Fatalf("refused: %+v %v asked %q", out, ds.Err(), h.asked)
	}
	if got, _ := state.Load(dir); len(got.Resources) != 1 {
		t.Fatalf("a refused destroy changed the state: %d resources", len(got.Resources))
	}

	h = &recorder{approve: true}
	out, ds = Destroy(context.Background(), req, h)
	if ds.HasErrors() || !out.Applied || h.applied != 1 || !h.appliedOK {
		t.Fatalf("approved: %+v %v", out, ds.Err())
	}
	if got, _ := state.Load(dir); len(got.Resources) != 0 {
		t.Errorf("after destroy the state records %d resources", len(got.Resources))
	}

	out, ds = Destroy(context.Background(), req, &recorder{})
	if ds.HasErrors() || !out.NothingToDo {
		t.Errorf("again: %+v %v", out, ds.Err())
	}
}

// ReadState of a directory with no .sbx takes no lock and creates
// nothing.
func TestReadStateWritesNothing(t *testing.T) {
	dir := t.TempDir()
	lease, st, ds := ReadState(context.Background(), NoHooks{}, dir, StateReadOptions{Lock: true})
	if ds.HasErrors() || lease != nil || st == nil {
		t.Fatalf("lease %v state %v: %v", lease, st, ds.Err())
	}
	if _, err := os.Stat(filepath.Join(dir, state.Dir)); !os.IsNotExist(err) {
		t.Errorf("ReadState made %s: %v", state.Dir, err)
	}
}

// An apply with nothing to change still records the configuration's
// outputs in the state and shows them; a second one saves nothing new.
func TestApplyRecordsOutputs(t *testing.T) {
	cfg := writeSpec(t, "output \"greeting\" {\n  value = \"hello\"\n}\n")
	var h recorder
	if _, ds := Apply(context.Background(), ApplyRequest{Config: cfg, Lock: &lockfiles.Lock{}, RuntimeBase: t.TempDir()}, &h); ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	if len(h.outputs) != 1 || string(h.outputs[0]["greeting"].Value) != `"hello"` {
		t.Fatalf("outputs shown: %v", h.outputs)
	}
	st, err := state.Load(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if o := st.Outputs["greeting"]; o == nil || string(o.Value) != `"hello"` {
		t.Fatalf("state records outputs %v", st.Outputs)
	}
	serial := st.Serial
	if _, ds := Apply(context.Background(), ApplyRequest{Config: cfg, Lock: &lockfiles.Lock{}, RuntimeBase: t.TempDir()}, &h); ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	if st, _ = state.Load(cfg.Dir); st.Serial != serial {
		t.Errorf("the same outputs were saved again: serial %d, then %d", serial, st.Serial)
	}
}
