package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/proto/vfsproto"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/internal/snapshot"
	"github.com/sbx-dev/sbx/policy"
)

// Options say where and how the host runs a Spec: what is not the
// sandbox's own but this host's and this start's.
type Options struct {
	// Dir is where the machine's private directory is made; empty means
	// the temporary directory. Unix socket paths are short, so it must
	// be too (about 80 bytes at most).
	Dir string
	// Secrets holds the value of each secret Spec.Policy binds, by name
	// (sandboxnet.ResolveSecrets). A missing one is an error before
	// anything boots.
	Secrets map[string][]byte
	// AuditDir is where the egress audit log is written; empty means
	// none is kept.
	AuditDir string
	// Logger receives what goes wrong on the sandbox's network and in
	// its file servers; nil discards it.
	Logger *slog.Logger
	// Hypervisor runs the sandbox's machine (machine.Options.Hypervisor);
	// nil means QEMU, on what qemu.Probe finds.
	Hypervisor machine.Hypervisor
	// CA mints the certificates the guest sees; nil means the user's
	// (ca.LoadOrCreate in ca.DefaultDir).
	CA *ca.Authority
	// KeepConsole, when set, is a file the machine's console log is
	// moved to when it ends (machine.Options.KeepConsole).
	KeepConsole string
	// KeepDisk, when set, is where the machine's root disk is moved when
	// Stop ends it after a clean power-off (machine.Options.KeepDisk):
	// a qcow2 overlay over the image's disk. Such a sandbox is never
	// saved or resumed (Snapshots is ignored).
	KeepDisk string
	// ConfigureTimeout bounds the guest's configure request in Start;
	// zero means DefaultConfigureTimeout's.
	ConfigureTimeout time.Duration
	// Snapshots, when set, is where saved machines for warm starts are
	// kept: the machine resumes from the one of its shape (image,
	// size, devices, hypervisor), which the first start of a shape
	// saves, and boots only when that fails (Started says so). nil
	// always boots.
	Snapshots *snapshot.Cache
	// MountTransport is how the mounts that name no transport of their
	// own reach the guest: empty chooses virtio-fs where the hypervisor
	// can give the machine such devices and 9P elsewhere (Started says
	// which, and why not virtio-fs); a transport named is used or the
	// start fails.
	MountTransport sandboxfs.Transport
	// ClockCheck is how often the host checks, while the sandbox runs,
	// whether it slept or its clock was stepped, and then sets the
	// guest's clock again (clock.go); zero means DefaultClockCheck,
	// negative never.
	ClockCheck time.Duration
	// clockDrift replaces wallDrift in tests.
	clockDrift func() time.Duration
	// Bench holds the machine's knobs for benchmarks
	// (machine.Options.Bench). Sandboxes never set it: only bench/ does,
	// to measure what a setting costs against the sandbox's own.
	Bench machine.Bench
}

// benchmarking reports whether a benchmark's knobs are set: such a
// machine is never saved or resumed, so that what it measures is the
// setting's cost alone.
func (o Options) benchmarking() bool { return o.Bench != (machine.Bench{}) }

// Sandbox is a started sandbox: its machine and what the host serves it
// (its network and its mounts' file servers). Its methods are safe for
// concurrent use.
type Sandbox struct {
	spec  Spec
	m     *machine.Machine
	net   *sandboxnet.Net
	files *sandboxfs.Set

	// updating serializes Update: the policy recorded in spec, the
	// network's and what the guest was told are one update's.
	updating sync.Mutex

	mu        sync.Mutex
	configure func(context.Context, agentproto.Configure) error

	started Started

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// Start opens the mounts' file servers (a missing host directory is an
// error before anything boots), builds the network enforcing
// spec.Policy, boots the machine on both and configures its guest —
// address, resolver, CA, the secrets' placeholders, the mounts — before
// it returns. ctx bounds the start only. On failure nothing is left
// running. The sandbox runs until Stop or until its machine ends; then
// the host's servers are closed and Done is closed.
func Start(ctx context.Context, spec Spec, opts Options) (*Sandbox, error) {
	boot, err := BootFiles(spec.Image)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.Name, err)
	}
	mounts, transport, note, err := mountTransports(ctx, spec.Mounts, opts, boot.Platform.Architecture)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", spec.Name, err)
	}
	files, err := sandboxfs.Open(mounts, opts.Logger)
	if err != nil {
		return nil, err
	}
	netOpts := sandboxnet.Options{
		Sandbox:  spec.Name,
		Policy:   spec.Policy,
		Secrets:  opts.Secrets,
		AuditDir: opts.AuditDir,
		CA:       opts.CA,
		Logger:   opts.Logger,
	}
	n, err := sandboxnet.New(netOpts)
	if err != nil {
		return nil, errors.Join(err, files.Close())
	}
	// A network serves one machine: the boot after a failed warm start
	// is given a new one (nothing of the first reached a guest that
	// was configured).
	netClosed := false
	renew := func() (machine.Network, error) {
		err := n.Close()
		netClosed = true
		if err != nil {
			return nil, err
		}
		fresh, err := sandboxnet.New(netOpts)
		if err != nil {
			return nil, err
		}
		n, netClosed = fresh, false
		return n.Network(), nil
	}
	begin := time.Now()
	m, started, err := startMachine(ctx, spec, opts, renew, machine.Options{
		Name:        spec.Name,
		Boot:        boot,
		CPUs:        spec.CPUs,
		Memory:      spec.Memory,
		Dir:         opts.Dir,
		Hypervisor:  opts.Hypervisor,
		BootTimeout: spec.BootTimeout,
		StopTimeout: spec.StopTimeout,
		KeepConsole: opts.KeepConsole,
		KeepDisk:    opts.KeepDisk,
		Network:     n.Network(),
		Ports:       files.Ports(),
		FSSlots:     files.FSSlots(),
		Bench:       opts.Bench,
	})
	if err != nil {
		if !netClosed {
			err = errors.Join(err, n.Close())
		}
		return nil, errors.Join(err, files.Close())
	}
	s := &Sandbox{spec: spec, m: m, net: n, files: files, configure: m.Client().Configure, done: make(chan struct{})}
	go func() {
		<-m.Done()
		s.close()
		close(s.done)
	}()
	// The mounts served by virtio-fs devices are plugged in now, after
	// the point a warm start's machine was saved at: a machine with
	// such a device cannot be saved.
	if err := files.Plug(ctx, m); err != nil {
		return nil, errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
	}
	c := s.Configure()
	if m.Resumed() {
		// The guest has the saved machine's name, clock and random
		// state until it is told its own.
		if c.Identity, err = identity(spec.Name); err != nil {
			return nil, errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
		}
	}
	timeout := opts.ConfigureTimeout
	if timeout <= 0 {
		timeout = DefaultConfigureTimeout(spec)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	mark := time.Now()
	err = m.Client().Configure(cctx, c)
	started.Configure = time.Since(mark)
	cancel()
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			err = s.configureTimedOut(timeout)
		} else {
			err = fmt.Errorf("configuring the guest: %w", err)
		}
		return nil, errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
	}
	if files := s.net.CredentialFiles(); len(files) > 0 {
		if err := deliverCredentialFiles(ctx, m.Exec, files); err != nil {
			return nil, errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
		}
	}
	started.Took = time.Since(begin)
	started.Machine = m.Timings()
	started.Mounts, started.MountsNote = transport, note
	s.started = started
	if every := opts.ClockCheck; every >= 0 && m.Client().Guest().Has(agentproto.CapIdentity) {
		drift := opts.clockDrift
		if drift == nil {
			drift = wallDrift()
		}
		go s.keepClock(cmp.Or(every, DefaultClockCheck), drift, opts.Logger)
	}
	return s, nil
}

// mountTransports returns mounts with the transport of each that names
// none filled in (Options.MountTransport), that transport, and when it
// is 9P because virtio-fs cannot run here, why. The transport is empty
// when every mount names its own.
func mountTransports(ctx context.Context, mounts []sandboxfs.Mount, opts Options, arch string) ([]sandboxfs.Mount, sandboxfs.Transport, string, error) {
	if err := sandboxfs.CheckTransport(opts.MountTransport); err != nil {
		return nil, "", "", err
	}
	if !slices.ContainsFunc(mounts, func(m sandboxfs.Mount) bool { return m.Transport == "" }) {
		return mounts, "", "", nil
	}
	t, note := opts.MountTransport, ""
	switch t {
	case "":
		t = sandboxfs.TransportVirtioFS
		if err := machine.CanShareFiles(ctx, opts.Hypervisor, arch); err != nil {
			t, note = sandboxfs.Transport9P, err.Error()
		}
	case sandboxfs.TransportVirtioFS:
		if err := machine.CanShareFiles(ctx, opts.Hypervisor, arch); err != nil {
			return nil, "", "", fmt.Errorf("mounts over virtio-fs: %w", err)
		}
	}
	out := slices.Clone(mounts)
	for i := range out {
		if out[i].Transport == "" {
			out[i].Transport = t
		}
	}
	return out, t, note, nil
}

// DefaultConfigureTimeout is how long Start waits for the guest to
// apply its configure request, when Options.ConfigureTimeout is zero:
// the spec's boot timeout (or the machine's default), and for each
// mount the most the guest itself waits for it (vfsproto.MountAttempts
// of vfsproto.MountTimeout) and its port (mountPortWait). The guest's
// own bounds pass first, so that the error is usually the guest's,
// which says what its mount's relay saw; this one catches a guest that
// does not answer at all.
func DefaultConfigureTimeout(spec Spec) time.Duration {
	d := spec.BootTimeout
	if d <= 0 {
		d = machine.DefaultBootTimeout
	}
	perMount := vfsproto.MountAttempts*vfsproto.MountTimeout + mountPortWait
	return d + time.Duration(len(spec.Mounts))*perMount
}

// mountPortWait is the guest's bound on finding a mount's port, with a
// margin (package guest/guestcfg waits 10 seconds).
const mountPortWait = 15 * time.Second

// consoleLines is how much of the console a configure timeout quotes.
const consoleLines = 20

// configureTimedOut is the error of a configure request the guest did
// not finish within timeout: the step the guest last announced
// (bootproto.StepLine), which is the one it waits in, and the end of
// its console.
func (s *Sandbox) configureTimedOut(timeout time.Duration) error {
	console := s.m.Console()
	var where string
	if step, ok := bootproto.LastStep(console); ok {
		where = ": " + step + " did not finish"
	} else {
		var asked []string
		for _, m := range s.files.Guest() {
			asked = append(asked, "mount "+m.Path)
		}
		if len(asked) > 0 {
			where = " (it was asked to " + strings.Join(asked, ", ") + "; it announced no step)"
		}
	}
	return fmt.Errorf("sandbox %s: the guest did not finish configuring within %v%s\nconsole (%s), last lines:\n%s",
		s.spec.Name, timeout, where, machine.ConsoleFile, consoleTail(console, consoleLines))
}

// consoleTail is the last n lines of console, indented.
func consoleTail(console []byte, n int) string {
	text := strings.TrimRight(strings.ReplaceAll(string(console), "\r\n", "\n"), "\n")
	if text == "" {
		return "  (empty)"
	}
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Started says how the sandbox's machine started: booted or resumed,
// and how long Start took.
func (s *Sandbox) Started() Started { return s.started }

// Spec returns the spec the sandbox runs, with the policy it enforces
// now (the last Update's).
func (s *Sandbox) Spec() Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec
}

// Machine returns the sandbox's machine, for what Sandbox does not wrap
// (its directory, process, console, timings).
func (s *Sandbox) Machine() *machine.Machine { return s.m }

// Net returns the sandbox's network: its CA, placeholders and counters.
func (s *Sandbox) Net() *sandboxnet.Net { return s.net }

// Client returns the machine's own client of the guest agent, which
// Exec, Put and Get use. A supervisor closes it when it takes the agent's
// port over (and says so with ConfigureThrough); its clients go through
// the supervisor's router instead.
func (s *Sandbox) Client() *guestconn.Client { return s.m.Client() }

// Exec runs a command in the guest and waits for it (guestconn.Client.Exec).
func (s *Sandbox) Exec(ctx context.Context, cmd guestconn.Cmd) (*guestconn.ExitStatus, error) {
	return s.m.Exec(ctx, cmd)
}

// Put writes r's content to the guest file dest (guestconn.Client.Put).
func (s *Sandbox) Put(ctx context.Context, r io.Reader, dest string, mode fs.FileMode, owner *guestconn.Owner) error {
	return s.m.Put(ctx, r, dest, mode, owner)
}

// Get writes the content of the guest file path to w (guestconn.Client.Get).
func (s *Sandbox) Get(ctx context.Context, path string, w io.Writer) (*guestconn.FileInfo, error) {
	return s.m.Get(ctx, path, w)
}

// Configure is everything the guest agent must be told.
func (s *Sandbox) Configure() agentproto.Configure {
	c := s.net.Configure()
	c.Mounts = s.files.Guest()
	return c
}

// ConfigureThrough makes Update tell the guest its configuration through
// f rather than the machine's own client: the supervisor, which takes
// the agent's port over from the machine (its router), says so.
func (s *Sandbox) ConfigureThrough(f func(context.Context, agentproto.Configure) error) {
	s.mu.Lock()
	s.configure = f
	s.mu.Unlock()
}

// Update makes the sandbox enforce p from now on, with the given values
// of its secrets: new connections and requests follow it at once,
// connections to hosts p no longer allows are closed, and secrets keep
// the placeholders the guest knows (a rotated value reaches upstreams
// with no change in the guest). When the environment of the guest's
// commands changes (a secret added), the guest is configured again. The
// machine is not restarted, and its mounts are not changed: their
// rules are served as the sandbox started: a p whose mounts are not
// served alike (policy.SameMountsServed) is refused with
// ErrMountsChanged, and nothing changes. It reports whether the guest
// was configured again. Updates run one at a time, so concurrent ones
// leave one policy in force everywhere.
func (s *Sandbox) Update(ctx context.Context, p policy.Sandbox, secrets map[string][]byte) (reconfigured bool, err error) {
	s.updating.Lock()
	defer s.updating.Unlock()
	s.mu.Lock()
	mounts := s.spec.Policy.Mounts
	s.mu.Unlock()
	if !policy.SameMountsServed(mounts, p.Mounts) {
		return false, ErrMountsChanged
	}
	again, err := s.net.Update(p, secrets)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	s.spec.Policy = p
	configure := s.configure
	s.mu.Unlock()
	if again {
		if err := configure(ctx, s.Configure()); err != nil {
			return false, fmt.Errorf("the new policy is enforced, but the guest's environment could not be updated: %w", err)
		}
	}
	return again, nil
}

// ErrMountsChanged is Update's error for a policy whose mounts differ
// from those the sandbox serves.
var ErrMountsChanged = errors.New("the mounts of a running sandbox cannot change (its file servers keep the rules they started with): replace the sandbox")

// Stop stops the machine (machine.Machine.Stop) and closes what the host
// served it; it returns once both are done. Calling it again returns the
// machine's first result.
func (s *Sandbox) Stop(ctx context.Context) error {
	err := s.m.Stop(ctx)
	<-s.done
	return errors.Join(err, s.closeErr)
}

// Done is closed once the machine has ended and the host's servers are
// closed.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// close releases what the host served the sandbox, once.
func (s *Sandbox) close() {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.net.Close(), s.files.Close())
	})
}
