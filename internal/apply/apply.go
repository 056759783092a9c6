package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// DefaultParallelism is how many sandboxes Apply starts or stops at once
// when Options.Parallelism is zero.
const DefaultParallelism = 4

// Options configure Apply.
type Options struct {
	// Config is the configuration the plan was made from. Apply takes
	// its directory (where the sandboxes' host directories and secret
	// files are, and which names their supervisor directories) from it;
	// what it starts, updates and builds comes from the plan.
	Config *lang.Config
	// Plan is what to do; it was made against State.
	Plan *plan.Plan
	// State is the refreshed state the plan was made against. Apply
	// updates it as each change lands and saves it with Save.
	State *state.State
	// Save persists the state (state.Lease.Save); it is called after
	// every change, so that an interrupted apply leaves state that says
	// what runs.
	Save func(*state.State) error
	// Build builds the image block name, or finds it in the cache. It is
	// called for images the plan creates or replaces, and for the image
	// of every sandbox to start.
	Build func(ctx context.Context, name string) (*image.Result, error)
	// RuntimeBase is where supervisor directories go
	// (supervisor.RuntimeBase).
	RuntimeBase string
	// Spawn configures the supervisors started; the values of their
	// secrets are read in this process, from Spawn.Env and Bindings, and
	// handed to each supervisor through a pipe.
	Spawn supervisor.SpawnOptions
	// Bindings is the user's bindings file, which says where this host
	// reads each secret's value (sandboxnet.ResolveSecrets); nil means
	// none.
	Bindings *bindings.File
	// Parallelism bounds how many sandboxes start or stop at once; zero
	// means DefaultParallelism.
	Parallelism int
	// Progress, when set, is told about each change as it starts and
	// ends. It may be called from several goroutines at once.
	Progress func(Event)

	// spawn, when set, starts a supervisor in place of supervisor.Spawn
	// (for tests).
	spawn func(ctx context.Context, dir string, spec supervisor.Spec, opts supervisor.SpawnOptions) (*supervisor.Status, error)
}

// Event reports progress on one change.
type Event struct {
	Addr   addrs.Ref
	Action plan.Action
	// Done is false when the change starts, true when it has ended;
	// then Err says whether it failed, and Took how long it took.
	Done bool
	Err  error
	Took time.Duration
	// Runtime is the started sandbox's, on a successful create or
	// replace of a sandbox.
	Runtime *state.Runtime
}

// Result summarizes an apply.
type Result struct {
	// Applied counts the changes that landed, Failed those that did not
	// and Skipped those not tried (after an interruption, or because the
	// image they need failed).
	Applied, Failed, Skipped int
	// Created, Updated, Replaced and Destroyed count what happened to
	// the resources: each change that landed counts under its action (a
	// deleted image, which leaves state, as destroyed). A replaced
	// sandbox whose old machine was stopped but whose new one did not
	// start — it failed, or the apply was interrupted first — counts as
	// destroyed (and as failed or skipped): the old sandbox is gone.
	Created, Updated, Replaced, Destroyed int
}

// Apply carries out the plan's changes, in this order: images are built
// (created or replaced images) and dropped from state (deleted images);
// sandboxes that are deleted or replaced are stopped and their
// supervisor directories removed; sandboxes that are created or replaced
// are started, each by a detached supervisor (supervisor.Spawn), up to
// Parallelism at once, with the spec the plan resolved (the change's
// After, through pipeline.PlannedSpec) booting the image Build built for
// the image hash the plan records (another hash is an error); sandboxes
// updated in place are handed the plan's new policy and get it recorded.
// State is saved after every change.
//
// A change that fails does not stop the others that do not depend on it;
// their errors are joined in the returned error. When ctx ends, changes
// in flight are abandoned (a supervisor being started is told to stop)
// and no new one begins; the error is then ctx's.
func Apply(ctx context.Context, opts Options) (Result, error) {
	a := &applier{opts: opts, images: map[string]*image.Result{}, imageErr: map[string]error{}}
	if a.opts.Parallelism <= 0 {
		a.opts.Parallelism = DefaultParallelism
	}
	if opts.Plan == nil || opts.State == nil || opts.Config == nil || opts.Save == nil || opts.Build == nil {
		return Result{}, errors.New("apply: missing plan, state, configuration, Save or Build")
	}
	var images, deletes, creates, updates []*plan.ResourceChange
	for _, c := range opts.Plan.Changes {
		switch {
		case c.Action == plan.NoOp:
		case c.Addr.Kind == addrs.Image:
			images = append(images, c)
		case c.Action == plan.Delete:
			deletes = append(deletes, c)
		case c.Action == plan.Replace:
			deletes = append(deletes, c)
			creates = append(creates, c)
		case c.Action == plan.Create:
			creates = append(creates, c)
		case c.Action == plan.Update:
			updates = append(updates, c)
		}
	}
	total := len(images) + len(deletes) + len(creates) + len(updates)
	for _, c := range creates {
		if c.Action == plan.Replace {
			total-- // in deletes too, and one change
		}
	}

	for _, c := range images {
		if ctx.Err() != nil {
			break
		}
		a.image(ctx, c)
	}
	a.parallel(ctx, deletes, a.stop)
	a.parallel(ctx, creates, a.start)
	a.unstarted()
	for _, c := range updates {
		if ctx.Err() != nil {
			break
		}
		a.update(ctx, c)
	}
	a.res.Skipped = max(total-a.res.Applied-a.res.Failed, 0)
	err := errors.Join(a.errs...)
	if ctx.Err() != nil {
		err = errors.Join(fmt.Errorf("apply interrupted: %w", ctx.Err()), err)
	}
	return a.res, err
}

type applier struct {
	opts Options

	mu       sync.Mutex // guards what follows, and opts.State
	res      Result
	errs     []error
	images   map[string]*image.Result
	imageErr map[string]error
	// stopped holds the replaced sandboxes whose old machine is gone and
	// whose new one start has not begun, with when the replace began.
	stopped map[addrs.Ref]time.Time
}

func (a *applier) event(e Event) {
	if a.opts.Progress != nil {
		a.opts.Progress(e)
	}
}

// finish records how change c ended and saves the state.
func (a *applier) finish(c *plan.ResourceChange, began time.Time, err error, rt *state.Runtime, counts bool) {
	a.mu.Lock()
	if err == nil {
		err = a.opts.Save(a.opts.State)
		if err != nil {
			err = fmt.Errorf("%s: saving state: %w", c.Addr, err)
		}
	}
	if counts {
		if err != nil {
			a.res.Failed++
		} else {
			a.res.Applied++
			a.count(c.Action)
		}
	}
	if err != nil {
		a.errs = append(a.errs, err)
	}
	a.mu.Unlock()
	a.event(Event{Addr: c.Addr, Action: c.Action, Done: true, Err: err, Took: time.Since(began), Runtime: rt})
}

// count counts a change of action that landed. a.mu is held.
func (a *applier) count(action plan.Action) {
	switch action {
	case plan.Create:
		a.res.Created++
	case plan.Update:
		a.res.Updated++
	case plan.Replace:
		a.res.Replaced++
	case plan.Delete:
		a.res.Destroyed++
	}
}

// image builds a created or replaced image, or forgets a deleted one.
func (a *applier) image(ctx context.Context, c *plan.ResourceChange) {
	began := time.Now()
	a.event(Event{Addr: c.Addr, Action: c.Action})
	if c.Action == plan.Delete {
		a.mu.Lock()
		a.remove(c.Addr)
		a.mu.Unlock()
		a.finish(c, began, nil, nil, true)
		return
	}
	r, err := a.build(ctx, c.Addr.Name)
	if err == nil {
		rec := *c.After
		attrs := *c.After.Image
		attrs.Outputs = r.Digests()
		rec.Image = &attrs
		a.mu.Lock()
		a.put(&rec)
		a.mu.Unlock()
	}
	a.finish(c, began, err, nil, true)
}

// build builds an image once per apply.
func (a *applier) build(ctx context.Context, name string) (*image.Result, error) {
	a.mu.Lock()
	r, err := a.images[name], a.imageErr[name]
	a.mu.Unlock()
	if r != nil || err != nil {
		return r, err
	}
	r, err = a.opts.Build(ctx, name)
	if err != nil {
		err = fmt.Errorf("%s: %w", addrs.ImageRef(name), err)
	}
	a.mu.Lock()
	a.images[name], a.imageErr[name] = r, err
	a.mu.Unlock()
	return r, err
}

// parallel runs f on each change, Parallelism at once, until ctx ends.
func (a *applier) parallel(ctx context.Context, cs []*plan.ResourceChange, f func(context.Context, *plan.ResourceChange)) {
	sem := make(chan struct{}, a.opts.Parallelism)
	var wg sync.WaitGroup
	for _, c := range cs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(ctx, c)
		}()
	}
	wg.Wait()
}

// stop ends a deleted or replaced sandbox and removes its supervisor
// directory. The sandbox leaves state once it is gone.
func (a *applier) stop(ctx context.Context, c *plan.ResourceChange) {
	began := time.Now()
	// A replace begins here, with the old sandbox's stop.
	a.event(Event{Addr: c.Addr, Action: c.Action})
	dir, pid, qemu, err := a.stopTarget(c)
	if err == nil {
		// Stopping is not abandoned on interruption: a half-stopped
		// sandbox is worse than a late one.
		err = supervisor.Remove(context.WithoutCancel(ctx), dir, pid, qemu)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", c.Addr, err)
	}
	if err != nil || c.Action == plan.Delete {
		if err == nil {
			a.mu.Lock()
			a.remove(c.Addr)
			a.mu.Unlock()
		}
		a.finish(c, began, err, nil, true)
		return
	}
	// The first half of a replace: the old sandbox is gone, and state
	// says so at once; start finishes the change.
	a.mu.Lock()
	a.remove(c.Addr)
	err = a.opts.Save(a.opts.State)
	if err == nil {
		if a.stopped == nil {
			a.stopped = map[addrs.Ref]time.Time{}
		}
		a.stopped[c.Addr] = began
	}
	a.mu.Unlock()
	if err != nil {
		a.finish(c, began, fmt.Errorf("%s: saving state: %w", c.Addr, err), nil, true)
	}
}

// stopTarget returns the supervisor directory of the sandbox c stops and
// the process ids state last recorded for it. The directory is the one
// sbx makes for the sandbox (supervisor.SandboxDir), never the one state
// records: state is a file in the configuration's directory, which an
// untrusted checkout writes, and Remove deletes files in the directory
// and kills processes there. A recorded directory that is another is an
// error, so that nothing is stopped or removed on its word; the recorded
// process ids are hints that Remove verifies.
func (a *applier) stopTarget(c *plan.ResourceChange) (dir string, pid, qemuPid int, err error) {
	dir, err = a.sandboxDir(c.Addr.Name)
	if err != nil || c.Before == nil || c.Before.Sandbox == nil || c.Before.Sandbox.Runtime == nil {
		return dir, 0, 0, err
	}
	rt := c.Before.Sandbox.Runtime
	if err := recordedElsewhere(rt, dir); err != nil {
		return "", 0, 0, fmt.Errorf("%w; refusing to stop processes or remove files there on the state's word. "+
			"If sbx started the sandbox with another runtime directory (SBX_RUNTIME_DIR, XDG_RUNTIME_DIR) "+
			"or through another path to this configuration, run it again the same way", err)
	}
	return dir, rt.Pid, rt.QEMUPid, nil
}

// start starts a created or replaced sandbox with a detached supervisor
// and records it in state with its runtime.
func (a *applier) start(ctx context.Context, c *plan.ResourceChange) {
	began := time.Now()
	if c.Action == plan.Replace {
		a.mu.Lock()
		stopBegan, ok := a.stopped[c.Addr]
		delete(a.stopped, c.Addr)
		a.mu.Unlock()
		if !ok {
			return // the stop failed and was counted
		}
		began = stopBegan // the start event came with the stop
	} else {
		a.event(Event{Addr: c.Addr, Action: c.Action})
	}
	rt, err := a.spawn(ctx, c)
	if err != nil {
		if c.Action == plan.Replace {
			a.mu.Lock()
			a.res.Destroyed++ // the old sandbox is gone all the same
			a.mu.Unlock()
		}
		a.finish(c, began, fmt.Errorf("%s: %w", c.Addr, err), nil, true)
		return
	}
	rec := *c.After
	attrs := *c.After.Sandbox
	attrs.Runtime = rt
	rec.Sandbox = &attrs
	a.mu.Lock()
	a.put(&rec)
	a.mu.Unlock()
	a.finish(c, began, nil, rt, true)
}

// unstarted ends the replaces whose old sandbox was stopped but whose
// new one start never began (the apply was interrupted in between):
// each counts as destroyed, and its change ends with an error saying so.
// The error does not wrap the interruption's, so that a caller which
// leaves those unsaid still says this one.
func (a *applier) unstarted() {
	a.mu.Lock()
	left := a.stopped
	a.stopped = nil
	a.res.Destroyed += len(left)
	a.mu.Unlock()
	for _, addr := range slices.SortedFunc(maps.Keys(left), compareRefs) {
		err := fmt.Errorf("%s: its old sandbox was stopped and removed, but the apply was interrupted before the new one started", addr)
		a.mu.Lock()
		a.errs = append(a.errs, err)
		a.mu.Unlock()
		a.event(Event{Addr: addr, Action: plan.Replace, Done: true, Err: err, Took: time.Since(left[addr])})
	}
}

// spawn starts the sandbox c's After resolved: its spec is the plan's
// (pipeline.PlannedSpec), booting the image built for the image hash the
// plan records, never one read again from the configuration.
func (a *applier) spawn(ctx context.Context, c *plan.ResourceChange) (*state.Runtime, error) {
	if c.After == nil || c.After.Sandbox == nil {
		return nil, errors.New("the plan has no sandbox to start")
	}
	attrs := c.After.Sandbox
	img, err := a.build(ctx, attrs.Image)
	if err != nil {
		return nil, err
	}
	dir, err := a.sandboxDir(c.Addr.Name)
	if err != nil {
		return nil, err
	}
	// Whatever is left in the directory (a sandbox state lost track of)
	// goes first.
	if err := supervisor.Remove(context.WithoutCancel(ctx), dir, 0, 0); err != nil {
		return nil, err
	}
	secrets, err := a.secrets(ctx, attrs.Policy)
	if err != nil {
		return nil, err
	}
	spawn := a.opts.Spawn
	spawn.Secrets = secrets
	spec, err := pipeline.PlannedSpec(a.opts.Config.Dir, c.After, img)
	if err != nil {
		return nil, err
	}
	start := supervisor.Spawn
	if a.opts.spawn != nil {
		start = a.opts.spawn
	}
	st, err := start(ctx, dir, spec, spawn)
	if err != nil {
		return nil, err
	}
	return &state.Runtime{
		Dir:     dir,
		Pid:     st.Pid,
		QEMUPid: st.QEMUPid,
		Accel:   st.Accel,
		Started: time.Now().UTC().Format(time.RFC3339),
	}, nil
}

// update makes the running sandbox enforce its new policy (a reload of
// its supervisor: new connections and requests follow it at once, with
// the secrets' values read again) and records it. The running sandbox
// keeps its runtime.
func (a *applier) update(ctx context.Context, c *plan.ResourceChange) {
	began := time.Now()
	a.event(Event{Addr: c.Addr, Action: c.Action})
	rec := *c.After
	attrs := *c.After.Sandbox
	if c.Before != nil && c.Before.Sandbox != nil {
		attrs.Runtime = c.Before.Sandbox.Runtime
	}
	err := a.reload(ctx, c.Addr.Name, attrs.Policy)
	if err == nil {
		rec.Sandbox = &attrs
		a.mu.Lock()
		a.put(&rec)
		a.mu.Unlock()
	}
	a.finish(c, began, err, nil, true)
}

// reload sends sandbox name's policy pol, and the values of its
// secrets, to its supervisor.
func (a *applier) reload(ctx context.Context, name string, pol policy.Sandbox) error {
	secrets, err := a.secrets(ctx, pol)
	if err != nil {
		return err
	}
	dir, err := a.sandboxDir(name)
	if err != nil {
		return err
	}
	return supervisor.Reload(ctx, dir, pol, secrets)
}

// secrets reads the values of the secrets of policy pol on this host,
// from the sources the bindings and the spec give them, with the
// environment the supervisors get.
func (a *applier) secrets(ctx context.Context, pol policy.Sandbox) (map[string][]byte, error) {
	environ := a.opts.Spawn.Env
	if environ == nil {
		environ = os.Environ()
	}
	return sandboxnet.ResolveSecrets(ctx, pol, sandboxnet.SecretSources{ConfigDir: a.opts.Config.Dir, Bindings: a.opts.Bindings, Environ: environ})
}

func (a *applier) sandboxDir(name string) (string, error) {
	dir, err := supervisor.SandboxDir(a.opts.RuntimeBase, a.opts.Config.Dir, name)
	if err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

// put adds or replaces r in state, keeping resources sorted. a.mu is held.
func (a *applier) put(r *state.Resource) {
	st := a.opts.State
	a.remove(r.Addr)
	st.Resources = append(st.Resources, r)
	slices.SortFunc(st.Resources, func(x, y *state.Resource) int { return compareRefs(x.Addr, y.Addr) })
}

// compareRefs orders addresses as addrs.Ref.Less does.
func compareRefs(x, y addrs.Ref) int {
	switch {
	case x.Less(y):
		return -1
	case y.Less(x):
		return 1
	}
	return 0
}

// remove drops the resource at addr from state. a.mu is held.
func (a *applier) remove(addr addrs.Ref) {
	st := a.opts.State
	st.Resources = slices.DeleteFunc(st.Resources, func(r *state.Resource) bool { return r.Addr == addr })
}
