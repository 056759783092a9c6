package sbx

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/lang"
)

// Options configure Load and what the Config does later.
type Options struct {
	// Vars ("name=value") and VarFiles set the configuration's
	// variables, as sbx's -var and -var-file do.
	Vars     []string
	VarFiles []string
	// Environ is the environment: SBX_VAR_name variables, npm and apt
	// configuration, SBX_CACHE_DIR, SBX_GUEST_AGENT and
	// SOURCE_DATE_EPOCH are read from it. Nil means os.Environ().
	Environ []string
	// HTTPClient fetches inputs (npm, https and, through its transport,
	// OCI registries); nil means a default client.
	HTTPClient *http.Client
	// Keychain authenticates to OCI registries; nil means the docker and
	// podman credential stores.
	Keychain authn.Keychain
	// ReadOnlyLock makes a lock file that is missing pins an error
	// instead of resolving them and writing sbx.lock.hcl (as sbx's
	// -lockfile=readonly).
	ReadOnlyLock bool
	// Logger receives the builders' progress; nil discards it.
	Logger *slog.Logger
	// Bindings is the path of the user's bindings file, which says where
	// this host reads the values of the configuration's secrets
	// (docs/language.md, "The bindings file"). Empty means the file
	// Environ locates: $SBX_BINDINGS, else bindings.hcl in
	// $XDG_CONFIG_HOME/sbx, else ~/.config/sbx/bindings.hcl, where a
	// missing file binds nothing. A file named here must exist. It is
	// read once, when a sandbox first starts or a plan is applied, and
	// refused unless it is the user's own (a regular file, not a link,
	// that no one else may write). A secret whose spec names a command
	// is read only from a binding: a spec's command never runs.
	Bindings string
}

// Config is a loaded, valid configuration.
type Config struct {
	// Lang is the typed configuration: its images, sandboxes and
	// policies.
	Lang *lang.Config

	opts     Options
	env      pipeline.Env
	mu       sync.Mutex
	lock     *lockfiles.Lock
	lockPath string
	binds    *bindings.File
}

// bindings returns the user's bindings file (Options.Bindings), read
// once.
func (c *Config) bindings() (*bindings.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.binds != nil {
		return c.binds, nil
	}
	var (
		f     *bindings.File
		diags hcl.Diagnostics
	)
	if c.opts.Bindings != "" {
		_, home, _, _ := bindings.Path(c.opts.Environ)
		f, diags = bindings.Load(c.opts.Bindings, bindings.Options{Home: home, Required: true})
	} else {
		f, diags = bindings.Find(c.opts.Environ)
	}
	if diags.HasErrors() {
		return nil, diagError("reading the bindings file", diags)
	}
	c.binds = f
	return f, nil
}

// checkSecrets reads the bindings file and checks that every secret of
// sb has a source this host may read (bindings.Check), before anything
// is built.
func (c *Config) checkSecrets(sb *lang.Sandbox) (*bindings.File, error) {
	f, err := c.bindings()
	if err != nil {
		return nil, err
	}
	if err := bindings.Check(f, c.Lang.Dir, sb.Policy); err != nil {
		return nil, fmt.Errorf("%s: %w", sb.Addr(), err)
	}
	return f, nil
}

// Load reads and validates the configuration in dir. Its error lists
// every problem with its file and line.
func Load(dir string, opts Options) (*Config, error) {
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	cfg, diags := lang.Load(dir, lang.Options{Vars: opts.Vars, VarFiles: opts.VarFiles, Environ: opts.Environ})
	if diags.HasErrors() {
		return nil, diagError("loading "+dir, diags)
	}
	env := pipeline.Env{Environ: opts.Environ, HTTPClient: opts.HTTPClient, Keychain: opts.Keychain, Logger: opts.Logger}
	return &Config{Lang: cfg, opts: opts, env: env}, nil
}

// diagError turns error diagnostics into one error naming each problem's
// position.
func diagError(what string, diags hcl.Diagnostics) error {
	var lines []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		line := d.Summary
		if d.Detail != "" {
			line += ": " + d.Detail
		}
		if d.Subject != nil {
			line = d.Subject.String() + ": " + line
		}
		lines = append(lines, line)
	}
	return fmt.Errorf("%s: %s", what, strings.Join(lines, "\n"))
}

// Lock returns the configuration's lock, from sbx.lock.hcl, first
// resolving and writing the pins it lacks (unless Options.ReadOnlyLock),
// as sbx build and sbx run do.
func (c *Config) Lock(ctx context.Context) (*Lock, error) {
	l, err := c.lockfile(ctx)
	if err != nil {
		return nil, err
	}
	return lockOf(c.lockPath, l), nil
}

// lockfile is Lock's lock as the builder takes it, resolved once.
func (c *Config) lockfile(ctx context.Context) (*lockfiles.Lock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock != nil {
		return c.lock, nil
	}
	l, diags := pipeline.Lock(ctx, c.Lang, c.env, pipeline.LockOptions{IfStale: true, ReadOnly: c.opts.ReadOnlyLock})
	if diags.HasErrors() {
		return nil, diagError("locking "+c.Lang.Dir, diags)
	}
	if l.Lock == nil {
		return nil, diagError(l.Path+" is not up to date with the configuration (run sbx lock)", l.Stale)
	}
	c.lock, c.lockPath = l.Lock, l.Path
	return c.lock, nil
}

// Build builds the image named image (an image block's name), or finds
// it in the cache, and returns its kernel, initramfs and disk: the same
// bytes sbx build makes from the same configuration, lock and
// environment. The lock is brought up to date first (see Lock). Unlike
// sbx build, Build does not record the output hashes in the lock file.
func (c *Config) Build(ctx context.Context, imageName string) (*Image, error) {
	r, err := c.build(ctx, imageName)
	if err != nil {
		return nil, err
	}
	return imageOf(r), nil
}

// build is Build with the builder's result, which Start boots.
func (c *Config) build(ctx context.Context, imageName string) (*image.Result, error) {
	if _, err := pipeline.Image(c.Lang, imageName); err != nil {
		return nil, err
	}
	lock, err := c.lockfile(ctx)
	if err != nil {
		return nil, err
	}
	opts, err := pipeline.ImageOptions(c.Lang.Dir, c.env)
	if err != nil {
		return nil, err
	}
	return pipeline.Build(ctx, c.Lang, lock, imageName, opts)
}

// Sandbox is a running sandbox: one VM booted from its image.
type Sandbox struct {
	// Name is the sandbox block's name.
	Name string

	spec *lang.Sandbox
	env  []string
	m    *machine.Machine
	sb   *sandbox.Sandbox
	// binds is the bindings file its secrets were read with; Update
	// reads them with it again.
	binds *bindings.File
}

// Start builds the image of the sandbox named name (see Config.Build),
// boots a VM of it with the sandbox's CPUs and memory, and returns once
// the guest agent answers. Its egress policy is enforced on the host and
// its secrets brokered (their values read from the sources the user's
// bindings file gives them, else from the spec's env: and file:
// sources, with opts.Environ or this process's environment; a spec's
// command never runs, and a secret left without a source fails Start
// before the build), and its workspace mounts are served, before
// the first command runs (docs/egress.md, docs/vfs.md). Stop it when
// done; it is not stopped when ctx ends.
func Start(ctx context.Context, cfg *Config, name string, opts StartOptions) (*Sandbox, error) {
	sb, err := pipeline.Sandbox(cfg.Lang, name)
	if err != nil {
		return nil, err
	}
	binds, err := cfg.checkSecrets(sb)
	if err != nil {
		return nil, err
	}
	r, err := cfg.build(ctx, sb.Image)
	if err != nil {
		return nil, err
	}
	so := opts.internal().WithBindings(binds)
	s, err := pipeline.Start(ctx, cfg.Lang, sb, r, so)
	if err != nil {
		return nil, err
	}
	return &Sandbox{Name: sb.Name, spec: sb, env: cfg.Lang.CommandEnv(sb), m: s.Machine(), sb: s, binds: binds}, nil
}

// cmd applies the sandbox's defaults to c: its user when c names none,
// and its environment under c's.
func (s *Sandbox) cmd(c guestconn.Cmd) (guestconn.Cmd, error) {
	if err := sandboxnet.CheckEnv(s.policy(), c.Env); err != nil {
		return c, err
	}
	if c.User == "" {
		c.User = s.spec.User
	}
	c.Env = append(slices.Clone(s.env), c.Env...)
	return c, nil
}

// Exec runs a command in the sandbox and waits for it, streaming its
// standard input and output as it runs. A command killed by a signal is
// not an error: its ExitStatus says so. When ctx ends first the
// command's process group is killed and ctx's error returned with the
// status.
func (s *Sandbox) Exec(ctx context.Context, c Cmd) (*ExitStatus, error) {
	st, err := s.exec(ctx, c.internal())
	return exitStatus(st), err
}

// StartProcess starts a command and returns once it runs; Wait on the
// process for its end.
func (s *Sandbox) StartProcess(ctx context.Context, c Cmd) (*Process, error) {
	g, err := s.cmd(c.internal())
	if err != nil {
		return nil, err
	}
	p, err := s.m.StartProcess(ctx, g)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Put writes r's content to the guest file dest with mode's permission
// bits, owned by owner (nil: root).
func (s *Sandbox) Put(ctx context.Context, r io.Reader, dest string, mode fs.FileMode, owner *Owner) error {
	var o *guestconn.Owner
	if owner != nil {
		o = &guestconn.Owner{UID: owner.UID, GID: owner.GID}
	}
	return s.m.Put(ctx, r, dest, mode, o)
}

// Get writes the content of the guest file path to w.
func (s *Sandbox) Get(ctx context.Context, path string, w io.Writer) (*FileInfo, error) {
	fi, err := s.m.Get(ctx, path, w)
	if fi == nil {
		return nil, err
	}
	return &FileInfo{Size: fi.Size, Mode: fi.Mode, UID: fi.UID, GID: fi.GID}, err
}

// Dir is the VM's private directory, removed by Stop.
func (s *Sandbox) Dir() string { return s.m.Dir() }

// Accel names the accelerator the VM runs under: "kvm", "hvf" or
// "tcg" (QEMU's software emulation).
func (s *Sandbox) Accel() string { return string(s.m.Accel()) }

// BootTime is how long the boot (or the resume) took, from QEMU's start
// until the guest agent answered.
func (s *Sandbox) BootTime() time.Duration { return s.m.BootTime() }

// Resumed reports whether the VM was resumed from the machine saved for
// the sandbox's shape (a warm start) rather than booted; WarmStartError
// says why a warm start that was to be made was not ("" when none
// failed).
func (s *Sandbox) Resumed() bool { return s.m.Resumed() }

// WarmStartError says why the sandbox booted although a warm start was
// to be made: a snapshot that did not verify or resume. Empty otherwise.
func (s *Sandbox) WarmStartError() string { return s.sb.Started().Warning }

// MountTransport is how the sandbox's workspace mounts reach the guest:
// "virtiofs" (a virtio-fs device the guest kernel drives itself) or
// "9p" (a port relayed by the guest agent), empty when it has none.
// When it is 9P because virtio-fs cannot run on this host, note says
// why.
func (s *Sandbox) MountTransport() (transport, note string) {
	st := s.sb.Started()
	return string(st.Mounts), st.MountsNote
}

// Console returns the VM's serial console output so far (the kernel's
// and the guest init's messages): at most its last MiB.
func (s *Sandbox) Console() []byte { return s.m.Console() }

// Stop powers the VM off (killing it if it does not go within the
// machine's stop timeout) and removes its files. It waits for QEMU to
// exit and for the host's network and file servers to close; a ctx that
// has already ended makes it kill at once.
func (s *Sandbox) Stop(ctx context.Context) error {
	return s.sb.Stop(ctx)
}
