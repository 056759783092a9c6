package image_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// fakeProvisioner writes the base disk followed by the steps' commands
// (and, when varying, the run's number): a disk of its own per set of
// steps, the same bytes every time unless varying.
type fakeProvisioner struct {
	runs    atomic.Int64
	varying bool
	fail    string // the step that fails
	bases   []string
}

func (f *fakeProvisioner) Provision(ctx context.Context, req image.ProvisionRequest) error {
	n := f.runs.Add(1)
	base, err := os.ReadFile(req.Base.Outputs[image.OutputDisk].Path)
	if err != nil {
		return err
	}
	f.bases = append(f.bases, req.Base.Outputs[image.OutputDisk].Digest)
	for _, s := range req.Image.Provision {
		if req.Step != nil {
			req.Step(s.Name)
		}
		if s.Name == f.fail {
			return &image.ProvisionError{Image: req.Image.Name, Step: s.Name, ExitCode: 3, Output: "no such package\n"}
		}
		base = append(base, strings.Join(s.Run, " ")...)
	}
	if f.varying {
		base = fmt.Appendf(base, "run %d", n)
	}
	return os.WriteFile(req.Disk, base, 0o644)
}

// withSteps returns a copy of img with steps, and li locked for them.
func withSteps(img *lang.Image, li *lockfiles.Image, cmds ...string) (*lang.Image, *lockfiles.Image) {
	c := *img
	c.Provision = nil
	for i, cmd := range cmds {
		c.Provision = append(c.Provision, &lang.Provision{Name: fmt.Sprintf("step%d", i), Run: []string{"sh", "-c", cmd}, Timeout: time.Minute})
	}
	l := *li
	l.ProvisionHash = recipe.ProvisionHash(&c)
	return &c, &l
}

// TestBuildProvisioned: provision steps make the image's disk under a key
// of their own; the base build keeps its entry, so a changed step runs
// again on the cached base; -verify says when the steps gave other bytes.
func TestBuildProvisioned(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	cfg, lock := w.configure(t, specOptions{})
	img, li := withSteps(cfg.Images["box"], lock.Lookup("box"), "echo one > /etc/tool")
	c := newCache(t)

	fp := &fakeProvisioner{}
	var st stages
	var steps []string
	opts := w.options(t, c)
	opts.Stage = st.add
	opts.Provision = fp
	opts.ProvisionStep = func(name string) { steps = append(steps, name) }
	r1, err := image.Build(ctx, img, li, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.get(); !slices.Contains(got, image.StageExt4) || got[len(got)-2] != image.StageProvision || got[len(got)-1] != image.StageStore {
		t.Errorf("stages %v: want the base build, then provisioning and storing", got)
	}
	if !slices.Equal(steps, []string{"step0"}) {
		t.Errorf("steps reported: %v", steps)
	}
	base, err := image.Build(ctx, cfg.Images["box"], lock.Lookup("box"), w.options(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if !base.Cached {
		t.Error("the base build has no cache entry of its own")
	}
	if r1.BuildKey == base.BuildKey || r1.BaseKey != base.BuildKey || r1.ProvisionHash != li.ProvisionHash || r1.InputHash != base.InputHash {
		t.Errorf("provisioned build key %s base %s hash %s; the base's key %s", r1.BuildKey, r1.BaseKey, r1.ProvisionHash, base.BuildKey)
	}
	if r1.Outputs[image.OutputDisk].Digest == base.Outputs[image.OutputDisk].Digest {
		t.Error("the provisioned disk is the base disk")
	}
	for _, name := range []string{image.OutputKernel, image.OutputInitramfs, image.OutputAgent} {
		if r1.Outputs[name].Digest != base.Outputs[name].Digest {
			t.Errorf("output %s differs from the base's", name)
		}
	}
	if fp.bases[0] != base.Outputs[image.OutputDisk].Digest {
		t.Errorf("the steps ran on %s, not the base disk", fp.bases[0])
	}

	// Again: a cache hit, nothing runs.
	again, err := image.Build(ctx, img, li, opts)
	if err != nil || !again.Cached || again.BuildKey != r1.BuildKey || fp.runs.Load() != 1 {
		t.Fatalf("second build: cached %v, key %s, runs %d, %v", again != nil && again.Cached, again.BuildKey, fp.runs.Load(), err)
	}

	// A changed command: another key; the base is taken from the cache.
	img2, li2 := withSteps(cfg.Images["box"], lock.Lookup("box"), "echo two > /etc/tool")
	st = stages{}
	hits := w.hits()
	r2, err := image.Build(ctx, img2, li2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r2.BuildKey == r1.BuildKey || r2.BaseKey != base.BuildKey || fp.runs.Load() != 2 {
		t.Errorf("changed step: key %s (was %s), base %s, runs %d", r2.BuildKey, r1.BuildKey, r2.BaseKey, fp.runs.Load())
	}
	if got := st.get(); !slices.Equal(got, []image.Stage{image.StageCached, image.StageProvision, image.StageStore}) {
		t.Errorf("stages of a changed step: %v, want the cached base, then provisioning", got)
	}
	if w.hits() != hits {
		t.Error("a changed step fetched inputs again")
	}

	t.Run("failing step", func(t *testing.T) {
		img3, li3 := withSteps(cfg.Images["box"], lock.Lookup("box"), "true", "apk add nothing")
		fail := &fakeProvisioner{fail: "step1"}
		o := w.options(t, c)
		o.Provision = fail
		_, err := image.Build(ctx, img3, li3, o)
		var perr *image.ProvisionError
		if !errors.As(err, &perr) || perr.Step != "step1" || perr.ExitCode != 3 || !strings.Contains(err.Error(), `"step1" exited with status 3`) || !strings.Contains(err.Error(), "no such package") {
			t.Fatalf("failing step: %v", err)
		}
		o.Provision = &fakeProvisioner{}
		if r, err := image.Build(ctx, img3, li3, o); err != nil || r.Cached {
			t.Errorf("after a failed step, the build was cached (%v) or failed: %v", r != nil && r.Cached, err)
		}
	})

	t.Run("no provisioner", func(t *testing.T) {
		img4, li4 := withSteps(cfg.Images["box"], lock.Lookup("box"), "echo four")
		if _, err := image.Build(ctx, img4, li4, w.options(t, c)); err == nil || !strings.Contains(err.Error(), "cannot run them") {
			t.Errorf("provision steps without a provisioner: %v", err)
		}
	})

	t.Run("verify", func(t *testing.T) {
		locked := *li
		locked.Outputs = r1.Digests()
		o := w.options(t, c)
		o.Provision = &fakeProvisioner{}
		o.Verify = true
		if _, err := image.Build(ctx, img, &locked, o); err != nil {
			t.Errorf("verifying steps that give the same bytes: %v", err)
		}
		o.Provision = &fakeProvisioner{varying: true}
		_, err := image.Build(ctx, img, &locked, o)
		var verr *image.VerifyError
		if !errors.As(err, &verr) || !verr.NotHermetic() || !strings.Contains(err.Error(), "not hermetic") ||
			!slices.Equal(verr.Outputs(), []string{image.OutputDisk}) {
			t.Fatalf("verifying steps that give other bytes: %v", err)
		}
		if len(verr.Diffs) != 2 || verr.Diffs[1].Against != "the lock file" || verr.Diffs[1].Want != locked.Outputs[image.OutputDisk] {
			t.Errorf("diffs %+v: want the cached build's and the lock's disk", verr.Diffs)
		}
	})
}
