package node

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// Local starts the sandboxes of one configuration directory on this
// host, building their images with its lock (never changed) on first
// use.
type Local struct {
	cfg     *lang.Config
	lock    *lockfiles.Lock
	env     pipeline.Env
	binds   *bindings.File
	environ []string

	mu     sync.Mutex
	images map[string]*image.Result
	built  map[string]*sync.Mutex
}

// LoadLocal loads the configuration in dir and its lock, which must be up
// to date, with environ as the environment (nil: this process's).
func LoadLocal(ctx context.Context, dir string, environ []string) (*Local, error) {
	cfg, diags := lang.Load(dir, lang.Options{Environ: environ})
	if diags.HasErrors() {
		return nil, diagError("loading "+dir, diags)
	}
	env := pipeline.Env{Environ: environ}
	l, diags := pipeline.Lock(ctx, cfg, env, pipeline.LockOptions{IfStale: true, ReadOnly: true})
	if diags.HasErrors() {
		return nil, diagError("reading the lock of "+dir, diags)
	}
	if l.Lock == nil {
		return nil, diagError(l.Path+" is not up to date with the configuration (run sbx lock)", l.Stale)
	}
	binds, diags := bindings.Find(environ)
	if diags.HasErrors() {
		return nil, diagError("reading the bindings file", diags)
	}
	return &Local{cfg: cfg, lock: l.Lock, env: env, binds: binds, environ: environ,
		images: map[string]*image.Result{}, built: map[string]*sync.Mutex{}}, nil
}

// PolicyHash is the hash (policy.Hash) of the compiled policy of the
// sandbox block name.
func (l *Local) PolicyHash(name string) (string, error) {
	p, err := l.Policy(name)
	if err != nil {
		return "", err
	}
	return policy.Hash(p), nil
}

// Policy is the compiled policy of the sandbox block name.
func (l *Local) Policy(name string) (policy.Sandbox, error) {
	sb, err := pipeline.Sandbox(l.cfg, name)
	if err != nil {
		return policy.Sandbox{}, err
	}
	return sb.Policy, nil
}

// Start builds (once) the image of sandbox block name and boots it in
// the directory vmDir; the caller stops it. secrets are values, by
// secret name, read from Kubernetes Secrets: those secrets take them,
// the others are read from this host's sources (bindings, the spec's
// env: and file:) as sbx run reads them.
func (l *Local) Start(ctx context.Context, name, vmDir string, secrets map[string][]byte) (*sandbox.Sandbox, error) {
	sb, err := pipeline.Sandbox(l.cfg, name)
	if err != nil {
		return nil, err
	}
	local := sb.Policy
	local.Secrets = slices.DeleteFunc(slices.Clone(local.Secrets), func(s policy.SecretBinding) bool { _, ok := secrets[s.Name]; return ok })
	if err := bindings.Check(l.binds, l.cfg.Dir, local); err != nil {
		return nil, fmt.Errorf("%s: %w", sb.Addr(), err)
	}
	img, err := l.image(ctx, sb.Image)
	if err != nil {
		return nil, err
	}
	opts := pipeline.StartOptions{Dir: vmDir, Environ: l.environ}.WithBindings(l.binds).WithSecretValues(secrets)
	return pipeline.Start(ctx, l.cfg, sb, img, opts)
}

// CommandEnv is the environment commands of sandbox name run with.
func (l *Local) CommandEnv(name string) []string {
	sb, err := pipeline.Sandbox(l.cfg, name)
	if err != nil {
		return nil
	}
	return l.cfg.CommandEnv(sb)
}

// User is the user commands of sandbox name run as.
func (l *Local) User(name string) string {
	sb, err := pipeline.Sandbox(l.cfg, name)
	if err != nil {
		return ""
	}
	return sb.User
}

func (l *Local) image(ctx context.Context, name string) (*image.Result, error) {
	l.mu.Lock()
	m := l.built[name]
	if m == nil {
		m = &sync.Mutex{}
		l.built[name] = m
	}
	l.mu.Unlock()
	m.Lock()
	defer m.Unlock()
	l.mu.Lock()
	r := l.images[name]
	l.mu.Unlock()
	if r != nil {
		return r, nil
	}
	opts, err := pipeline.ImageOptions(l.cfg.Dir, l.env)
	if err != nil {
		return nil, err
	}
	r, err = pipeline.Build(ctx, l.cfg, l.lock, name, opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.images[name] = r
	l.mu.Unlock()
	return r, nil
}

func diagError(what string, diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			msg := d.Summary
			if d.Detail != "" {
				msg += ": " + d.Detail
			}
			if d.Subject != nil {
				msg = d.Subject.String() + ": " + msg
			}
			return fmt.Errorf("%s: %s", what, msg)
		}
	}
	return fmt.Errorf("%s: failed", what)
}
