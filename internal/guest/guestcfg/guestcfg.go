package guestcfg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/netcfg"
	"github.com/sbx-dev/sbx/internal/guest/vfsmount"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// Files the configuration writes, besides agentproto.CACertPath and
// agentproto.CABundlePath.
const (
	ResolvConfPath = "/etc/resolv.conf"
	HostsPath      = "/etc/hosts"
	// LocalCAPath is where Debian's update-ca-certificates finds local
	// CAs: the CA is there too, so a package install that rebuilds the
	// bundle (installing ca-certificates does) keeps it.
	LocalCAPath = "/usr/local/share/ca-certificates/sbx-sandbox-ca.crt"
)

// ResolvOptions are the resolver options /etc/resolv.conf gets: the
// host's resolver answers at once or never, so a client must not wait
// for glibc's default 5 seconds times 2 attempts per name.
const ResolvOptions = "options timeout:2 attempts:2"

// Options configure a State.
type Options struct {
	// Root is the guest's root directory: "/" in the guest, a
	// temporary directory in tests.
	Root string
	// Hostname names the machine in /etc/hosts; empty means
	// os.Hostname (the agent set it at boot).
	Hostname string
	// Net configures the interface; nil means netcfg.Apply in the
	// agent's network namespace. Tests replace it.
	Net func(ctx context.Context, nc agentproto.NetConfig) error
	// Mount makes one workspace mount; nil means finding the port's
	// device under Root and vfsmount.Mount. The mount lives on after
	// the request that made it. Tests replace it.
	Mount func(m agentproto.Mount) error
	// Step, when set, is told each step that can wait on something
	// outside the guest as it begins ("network", "mount
	// /workspace from sbx.vfs.0"): the agent prints it on the console
	// (bootproto.StepLine), so that a request that never finishes says
	// where it waits.
	Step func(step string)
	// Identity sets the kernel's host name, clock and random pool; nil
	// means the guest's own (SetIdentity). Tests replace it.
	Identity func(id agentproto.Identity) error
}

// State applies configure requests and holds the exec defaults they set.
// It is safe for concurrent use; requests apply one at a time.
type State struct {
	opts Options

	apply sync.Mutex // one Configure at a time
	// hosts says an earlier Configure wrote /etc/hosts, so a later one
	// rewrites it even without lines of its own: lines it dropped go.
	hosts bool

	mu  sync.Mutex
	env []string

	// hostname is the name /etc/hosts gives the machine: Options'
	// until an Identity names another.
	hostname string

	// mounted maps each path mounted so far to its port or tag.
	mounted map[string]string
}

// New returns a State that has applied nothing: execs get no defaults
// from it until a Configure.
func New(opts Options) *State {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Net == nil {
		opts.Net = func(ctx context.Context, nc agentproto.NetConfig) error {
			return netcfg.Apply(ctx, nc, netcfg.Options{})
		}
	}
	if opts.Mount == nil {
		root := opts.Root
		opts.Mount = func(m agentproto.Mount) error {
			// The mount outlives the request: its relay runs until the
			// host closes the port.
			ctx := context.Background()
			if m.Tag != "" {
				return vfsmount.MountFS(ctx, m.Tag, m.Path, vfsmount.Options{ReadOnly: m.ReadOnly})
			}
			dev, err := bootproto.FindPort(ctx, root, m.Port, portWait, 0)
			if err != nil {
				return fmt.Errorf("mount %s: %w", m.Path, err)
			}
			return vfsmount.Mount(ctx, dev, m.Path, vfsmount.Options{ReadOnly: m.ReadOnly})
		}
	}
	if opts.Identity == nil {
		opts.Identity = SetIdentity
	}
	return &State{opts: opts, hostname: opts.Hostname, mounted: map[string]string{}}
}

// portWait bounds the wait for a mount's port to appear.
const portWait = 10 * time.Second

// Env returns the "KEY=value" entries the last successful Configure set
// as defaults for every exec: the CA variables when it named a CA, then
// its Env.
func (s *State) Env() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.env)
}

// Configure applies req: validated whole first (an invalid request
// changes nothing), then the files (the CA, /etc/hosts, resolv.conf),
// the exec defaults and last the network interface, whose driver may
// still be binding it. An error from the network step leaves the rest
// applied.
func (s *State) Configure(ctx context.Context, req agentproto.Configure) error {
	if err := req.Validate(); err != nil {
		return err
	}
	var ca []byte
	if len(req.CACertPEM) > 0 {
		ca, _ = agentproto.ParseCACerts(req.CACertPEM)
	}
	s.apply.Lock()
	defer s.apply.Unlock()

	// First: what follows may read the clock or draw random numbers.
	if id := req.Identity; id != nil {
		if err := s.opts.Identity(*id); err != nil {
			return err
		}
		if id.Hostname != "" {
			s.hostname = id.Hostname
			s.hosts = true
		}
	}
	if err := s.installCA(ca); err != nil {
		return err
	}
	if req.Net != nil || len(req.Hosts) > 0 || s.hosts {
		if err := s.writeHosts(req.Hosts); err != nil {
			return err
		}
		s.hosts = true
	}
	if req.Net != nil && req.Net.DNS != "" {
		body := "# written by sbx-guest from the host's configuration\nnameserver " + req.Net.DNS + "\n" + ResolvOptions + "\n"
		if err := s.write(ResolvConfPath, []byte(body), 0o644); err != nil {
			return err
		}
	}
	var env []string
	if ca != nil {
		env = agentproto.CAEnv()
	}
	env = append(env, req.Env...)
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()

	if req.Net != nil {
		s.step("network")
		if err := s.opts.Net(ctx, *req.Net); err != nil {
			return err
		}
	}
	for _, m := range req.Mounts {
		if src, ok := s.mounted[m.Path]; ok {
			if src != m.Source() {
				return fmt.Errorf("mount %s: already mounted from %s", m.Path, src)
			}
			continue
		}
		s.step(fmt.Sprintf("mount %s from %s", m.Path, m.Source()))
		if err := s.opts.Mount(m); err != nil {
			return err
		}
		s.mounted[m.Path] = m.Source()
	}
	return nil
}

func (s *State) step(what string) {
	if s.opts.Step != nil {
		s.opts.Step(what)
	}
}

func (s *State) path(p string) string {
	return filepath.Join(s.opts.Root, filepath.FromSlash(p))
}

// installCA puts ca (canonical PEM, or nil for none) in CACertPath and,
// once, at the end of the system bundle, taking out the CA an earlier
// Configure put there: the bundle is the image's roots plus at most the
// current sandbox CA, however many times it is configured.
func (s *State) installCA(ca []byte) error {
	old, err := os.ReadFile(s.path(agentproto.CACertPath))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("guestcfg: reading the previous CA: %w", err)
	}
	bundlePath := s.path(agentproto.CABundlePath)
	bundle, err := os.ReadFile(bundlePath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("guestcfg: reading the CA bundle: %w", err)
	}
	orig := bundle
	for _, c := range [][]byte{old, ca} {
		if len(c) > 0 {
			bundle = bytes.ReplaceAll(bundle, c, nil)
		}
	}
	if ca != nil {
		if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
			bundle = append(bundle, '\n')
		}
		bundle = append(bundle, ca...)
	}
	if !bytes.Equal(bundle, orig) {
		mode := fs.FileMode(0o644)
		if fi, err := os.Stat(bundlePath); err == nil {
			mode = fi.Mode().Perm()
		}
		if err := s.write(agentproto.CABundlePath, bundle, mode); err != nil {
			return err
		}
	}
	if ca == nil {
		for _, p := range []string{LocalCAPath, agentproto.CACertPath} {
			if err := os.Remove(s.path(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("guestcfg: %w", err)
			}
		}
		return nil
	}
	if err := s.write(LocalCAPath, ca, 0o644); err != nil {
		return err
	}
	// Last: it says which CA the bundle holds.
	return s.write(agentproto.CACertPath, ca, 0o644)
}

// writeHosts writes /etc/hosts: localhost, the machine's name, and the
// host's extra lines.
func (s *State) writeHosts(extra []string) error {
	name := s.hostname
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return fmt.Errorf("guestcfg: %w", err)
		}
	}
	var b strings.Builder
	b.WriteString("# written by sbx-guest from the host's configuration\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	fmt.Fprintf(&b, "127.0.1.1\t%s\n", name)
	for _, line := range extra {
		b.WriteString(line + "\n")
	}
	return s.write(HostsPath, []byte(b.String()), 0o644)
}

// write replaces a file whole: a temporary file beside it, synced, then
// renamed over it, so a reader sees the old content or the new, never a
// mix, and a crash leaves one of the two. Missing directories are made.
func (s *State) write(p string, data []byte, mode fs.FileMode) error {
	dest := s.path(p)
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("guestcfg: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".sbx-cfg-*")
	if err != nil {
		return fmt.Errorf("guestcfg: writing %s: %w", p, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("guestcfg: writing %s: %w", p, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("guestcfg: writing %s: %w", p, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("guestcfg: writing %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("guestcfg: writing %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("guestcfg: writing %s: %w", p, err)
	}
	ok = true
	return nil
}
