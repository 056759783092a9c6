package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/build/imagereg"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

const pushUsage = `
Usage: sbx push [options] [DIR] IMAGE REF

  Publish the image IMAGE of the configuration in DIR (default: the
  current directory) to the OCI registry repository or tag REF
  (registry.example/team/agent, or …/agent:v1), building it first if the
  cache does not hold it, as "sbx build" does (and recording its output
  hashes in sbx.lock.hcl). The image travels as one OCI artifact: its
  image.json and one layer per output (kernel, initramfs, disk, guest
  agent), each layer's digest the output's own. A REF without a tag is
  tagged sbx-<the build key's first 12 digits>. It prints the reference
  by digest, which names those bytes whatever the tag later points at.

  Credentials come from the Docker/OCI configuration (docker login), as
  for OCI base images. Commit the lock file: "sbx pull" accepts only the
  build it records.

Options:

  -lockfile=readonly  Never update sbx.lock.hcl; fail if it is not up to
                      date or records other output hashes.
` + varUsage + `  -no-color           Print without colour.
`

const pullUsage = `
Usage: sbx pull [options] [DIR] IMAGE REF

  Fetch the image IMAGE of the configuration in DIR (default: the current
  directory) from REF (a tag, or a reference by digest as "sbx push"
  printed it) into the cache, so that building, running or applying it
  here uses those bytes instead of building them. Only the build that
  sbx.lock.hcl records is accepted: its input hash and the hashes of its
  kernel, initramfs and disk must be the lock's, and every blob is checked
  against its digest as it is stored; anything else is refused and
  nothing is stored. The lock is read, never changed.

  The cache keeps a build under a key that includes the guest agent's
  digest: pull says so when this sbx's agent differs from the one the
  image was built with, as the next build would then build anew.

Options:

` + varUsage + `  -no-color           Print without colour.
`

type pushArgs struct {
	dir, image, ref string
	lockfile        lockfileMode
	vars            varFlags
	noColor         bool
}

// parsePushArgs reads [DIR] IMAGE REF.
func parsePushArgs(env *Env, verb, usage string, args []string, a *pushArgs, withLock bool) (int, bool) {
	flags := newFlagSet(verb)
	if withLock {
		flags.Var(&a.lockfile, "lockfile", "")
	}
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, usage, args)
	if !ok {
		return code, false
	}
	a.dir = "."
	switch len(pos) {
	case 2:
		a.image, a.ref = pos[0], pos[1]
	case 3:
		a.dir, a.image, a.ref = pos[0], pos[1], pos[2]
	default:
		newView(env, a.noColor).usageError(verb, "Wrong arguments", fmt.Sprintf("sbx %s takes [DIR] IMAGE REF: the image's name and a registry reference.", verb))
		return ExitError, false
	}
	return 0, true
}

func runPush(ctx context.Context, env *Env, args []string) int {
	var a pushArgs
	if code, ok := parsePushArgs(env, "push", pushUsage, args, &a, true); !ok {
		return code
	}
	v := newView(env, a.noColor)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	cfg, name, opts, lock, code, ok := a.load(ctx, env, v, a.lockfile == "readonly")
	if !ok {
		return code
	}
	p := newBuildProgress(env.Stderr, addrs.ImageRef(name).String())
	opts.Stage = p.stage
	opts.ProvisionStep = p.step
	opts.Fetch.Progress = p.bytes
	start := time.Now()
	r, err := pipeline.Build(ctx, cfg, lock, name, opts)
	p.done()
	if err != nil && ctx.Err() != nil {
		return interrupted(env, "nothing was pushed")
	}
	if err != nil {
		v.errorFrom(fmt.Sprintf("Cannot build %s", p.addr), err, false)
		return ExitError
	}
	if !recordOutputs(ctx, env, v, cfg, lock, map[string]*image.Result{name: r}, a.lockfile == "readonly") {
		return ExitError
	}
	d, err := imagereg.Push(ctx, r, a.ref, env.pipeline().Registry())
	if err != nil && ctx.Err() != nil {
		return interrupted(env, "the registry may hold some of the image's blobs, but no manifest names them")
	}
	if err != nil {
		v.errorDetail(fmt.Sprintf("Cannot push %s", p.addr), err.Error())
		return ExitError
	}
	v.println("%s: pushed (%s)", v.bold(p.addr), since(start))
	v.println("  %s", d)
	return ExitOK
}

func runPull(ctx context.Context, env *Env, args []string) int {
	var a pushArgs
	if code, ok := parsePushArgs(env, "pull", pullUsage, args, &a, false); !ok {
		return code
	}
	v := newView(env, a.noColor)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	cfg, name, opts, lock, code, ok := a.load(ctx, env, v, true)
	if !ok {
		return code
	}
	addr := addrs.ImageRef(name).String()
	li := lock.Lookup(name)
	if li == nil {
		v.errorf("%s is not in the lock file; run \"sbx lock %s\"", addr, a.dir)
		return ExitError
	}
	start := time.Now()
	r, err := imagereg.Pull(ctx, a.ref, opts.Cache, imagereg.Want{Image: name, InputHash: li.InputHash, Outputs: li.Outputs}, env.pipeline().Registry())
	if err != nil && ctx.Err() != nil {
		return interrupted(env, "nothing was stored in the cache")
	}
	if errors.Is(err, imagereg.ErrNotLocked) {
		v.errorDetail(fmt.Sprintf("Cannot pull %s", addr), err.Error())
		return ExitError
	}
	if err != nil {
		v.errorDetail(fmt.Sprintf("Cannot pull %s from %s", addr, a.ref), err.Error()+"\nNothing was stored in the cache.")
		return ExitError
	}
	v.println("%s: pulled into the cache (%s)", v.bold(addr), since(start))
	for _, out := range image.OutputOrder() {
		if o, ok := r.Outputs[out]; ok {
			v.println("  %-10s %s  %s", out, o.Path, o.Digest)
		}
	}
	if key, err := image.BuildKey(cfg.Images[name], li, opts); err == nil && key != r.BuildKey {
		v.warning("This sbx builds other bytes", fmt.Sprintf("%s was built with another guest agent (or SOURCE_DATE_EPOCH) than this sbx has, so a build here will not find it and builds anew: its build key is %s, this sbx's %s.", addr, r.BuildKey, key))
	}
	return ExitOK
}

// load reads what push and pull both start from: the configuration, the
// image named, the build options and the lock (never changed when
// readonly).
func (a *pushArgs) load(ctx context.Context, env *Env, v *view, readonly bool) (*lang.Config, string, image.Options, *lockfiles.Lock, int, bool) {
	cfg, ok := loadConfig(v, a.dir, a.vars.options(env))
	if !ok {
		return nil, "", image.Options{}, nil, ExitError, false
	}
	names, ok := imagesToBuild(v, cfg, []string{a.image})
	if !ok {
		return nil, "", image.Options{}, nil, ExitError, false
	}
	opts, ok := buildOptions(env, v, cfg)
	if !ok {
		return nil, "", image.Options{}, nil, ExitError, false
	}
	lock, ok := lockForPlan(ctx, env, v, cfg, readonly)
	if !ok {
		return nil, "", image.Options{}, nil, failedOrInterrupted(ctx, env, "the lock file was left as it was"), false
	}
	return cfg, names[0], opts, lock, 0, true
}
