package operation

import (
	"context"
	"fmt"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

// BuildImage builds the image name of cfg with lock, with the options
// env gives (pipeline.ImageOptions; configure, when set, may change them,
// to watch the stages say), or finds it in the cache, then records its
// output hashes in the lock file (RecordOutputs, readOnly as there). It
// is the build an apply runs for a sandbox about to start when its caller
// shows no build progress of its own.
func BuildImage(ctx context.Context, env pipeline.Env, h Hooks, cfg *lang.Config, lock *lockfiles.Lock, name string, readOnly bool, configure func(*image.Options)) (*image.Result, error) {
	opts, err := pipeline.ImageOptions(cfg.Dir, env)
	if err != nil {
		return nil, fmt.Errorf("cannot set up the build: %w", err)
	}
	if configure != nil {
		configure(&opts)
	}
	r, err := pipeline.Build(ctx, cfg, lock, name, opts)
	if err != nil {
		return nil, err
	}
	if ds := RecordOutputs(h, cfg, lock, map[string]*image.Result{name: r}, readOnly); ds.HasErrors() {
		return nil, fmt.Errorf("cannot record its outputs in %s: %w", lockfiles.FileName, ds.Err())
	}
	return r, nil
}
