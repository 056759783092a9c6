package pipeline

import (
	"context"
	"sync"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/fanout"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/lang"
)

// EvalMounts returns the workspace mounts of sandbox sb of cfg as an
// eval (package fanout) copies them for each run (Mounts). sbx eval and
// the Go API's Eval call it before the image is built, so that a bad
// mount fails first.
func EvalMounts(cfg *lang.Config, sb *lang.Sandbox) ([]fanout.Mount, error) {
	mounts, err := Mounts(cfg, sb)
	if err != nil {
		return nil, err
	}
	out := make([]fanout.Mount, 0, len(mounts))
	for _, m := range mounts {
		out = append(out, fanout.Mount{Policy: m.Policy, HostDir: m.HostDir})
	}
	return out, nil
}

// EvalStart returns how an eval starts each run's sandbox: sandbox sb of
// cfg from img through Start with opts, its mounts served from the run's
// copies and its audit log in the run's directory. started, when set,
// is given each started sandbox and returns what the run uses (a
// wrapper that applies the sandbox's command defaults, for one); nil
// means the sandbox itself. sbx eval and the Go API's Eval both start
// their runs through it.
func EvalStart(cfg *lang.Config, sb *lang.Sandbox, img *image.Result, opts StartOptions, started func(run int, s *sandbox.Sandbox) fanout.Sandbox) fanout.StartFunc {
	// One cache for every run: their machines share one copy of the
	// saved memory. It lives as long as the function (its memory file
	// is closed when both are collected; the machines keep theirs).
	var once sync.Once
	var snapsErr error
	return func(ctx context.Context, run int, dirs map[string]string, auditDir string) (fanout.Sandbox, error) {
		so := opts
		so.MountDirs, so.AuditDir = dirs, auditDir
		if !so.Cold {
			once.Do(func() { opts.snapshots, snapsErr = OpenSnapshots(Env{Environ: opts.Environ}) })
			if snapsErr != nil {
				return nil, snapsErr
			}
			so.snapshots = opts.snapshots
		}
		s, err := Start(ctx, cfg, sb, img, so)
		if err != nil {
			return nil, err
		}
		if started == nil {
			return s, nil
		}
		return started(run, s), nil
	}
}
