package sbx

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
)

// The types in this file are the Go API's own: each is converted to and
// from the internal package that implements it at the boundary, so that
// nothing this package exports names a type a program outside the
// module cannot construct (internal/archtest checks it).

// Cmd is a command to run in a sandbox: its arguments, environment,
// working directory, user, standard streams and optional terminal.
type Cmd struct {
	// Args is the command line; Args[0] is looked up in the process's
	// PATH when it holds no slash.
	Args []string
	// Env holds "KEY=value" entries over the sandbox's environment and
	// the guest's defaults (PATH, HOME, USER, LOGNAME, SHELL, and TERM
	// with a PTY). The host's environment is never sent.
	Env []string
	// Dir is the working directory; empty means the user's home.
	Dir string
	// User is a guest user name or uid, or "uid:gid"; empty means the
	// sandbox's user.
	User string
	// Stdin, when set, is copied to the process until it returns
	// io.EOF, which closes the process's stdin (on a PTY, it types ^D).
	// A nil Stdin reads as empty. The copy stops when the process
	// exits, but a Read already blocked keeps its goroutine until it
	// returns.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it.
	// With a PTY, all output goes to Stdout.
	Stdout io.Writer
	Stderr io.Writer
	// PTY, when set, runs the process on a pseudo-terminal.
	PTY *PTY
	// Started, when set, is called with the process once it runs,
	// before StartProcess returns (and before Exec waits): a caller of
	// Exec uses it to resize or signal the process meanwhile.
	Started func(*Process)
}

// PTY is the size and type of a pseudo-terminal.
type PTY struct {
	Rows, Cols uint16
	// Term is TERM; empty means the agent's default (xterm-256color).
	Term string
}

func (c Cmd) internal() guestconn.Cmd {
	g := guestconn.Cmd{
		Args:   c.Args,
		Env:    c.Env,
		Dir:    c.Dir,
		User:   c.User,
		Stdin:  c.Stdin,
		Stdout: c.Stdout,
		Stderr: c.Stderr,
	}
	if c.PTY != nil {
		g.PTY = &guestconn.PTY{Rows: c.PTY.Rows, Cols: c.PTY.Cols, Term: c.PTY.Term}
	}
	if c.Started != nil {
		started := c.Started
		g.Started = func(p *guestconn.Process) { started(&Process{p: p}) }
	}
	return g
}

// ExitStatus is how a command ended: its exit code, or the signal that
// killed it.
type ExitStatus struct {
	// Code is the exit code, or -1 when a signal killed the process.
	Code int
	// Signal names the signal that killed the process ("SIGTERM").
	Signal     string
	CoreDumped bool
}

func exitStatus(s *guestconn.ExitStatus) *ExitStatus {
	if s == nil {
		return nil
	}
	return &ExitStatus{Code: s.Code, Signal: s.Signal, CoreDumped: s.CoreDumped}
}

func (s *ExitStatus) internal() *guestconn.ExitStatus {
	return &guestconn.ExitStatus{Code: s.Code, Signal: s.Signal, CoreDumped: s.CoreDumped}
}

// Success reports whether the process exited with code 0.
func (s *ExitStatus) Success() bool { return s.internal().Success() }

// ShellCode is the status as one exit code, the way shells report it:
// the process's own code, or 128 plus the number of the signal that
// killed it (Linux's numbers, the guest's; 129 for a signal it does not
// know).
func (s *ExitStatus) ShellCode() int { return s.internal().ShellCode() }

// String describes the status ("exit status 3", "killed by SIGKILL");
// a signal's name, which the guest reports, has its control characters
// escaped.
func (s *ExitStatus) String() string { return s.internal().String() }

// Process is a command started in a sandbox by StartProcess.
type Process struct {
	p *guestconn.Process
}

// Pid returns the process's id in the guest.
func (p *Process) Pid() int { return p.p.Pid() }

// Signal sends a signal, by name ("SIGTERM", "TERM"), to the process's
// group in the guest.
func (p *Process) Signal(sig string) error { return p.p.Signal(sig) }

// Resize changes the size of the process's terminal.
func (p *Process) Resize(rows, cols uint16) error { return p.p.Resize(rows, cols) }

// Wait waits for the process to exit and for its output to be written.
// A process killed by a signal is not an error: its ExitStatus says so.
// The errors are: the connection ended, the context StartProcess was
// given ended (the status is returned too), or Stdout, Stderr or Stdin
// failed.
func (p *Process) Wait() (*ExitStatus, error) {
	st, err := p.p.Wait()
	return exitStatus(st), err
}

// Owner is who owns a file in the guest.
type Owner struct {
	UID, GID int
}

// FileInfo describes a file got from the guest.
type FileInfo struct {
	Size int64
	// Mode holds the permission bits, with fs.ModeSetuid, ModeSetgid
	// and ModeSticky.
	Mode fs.FileMode
	UID  int
	GID  int
}

// StartOptions configure Start.
type StartOptions struct {
	// BootTimeout bounds the boot; zero means two minutes.
	BootTimeout time.Duration
	// Dir is where the VM's private directory is made; empty means the
	// temporary directory. It must be short: unix socket paths are.
	Dir string
	// Environ is where the values of the sandbox's env: secrets are
	// read; nil means this process's environment.
	Environ []string
	// AuditDir is where the sandbox's egress audit log is written; empty
	// means none is kept.
	AuditDir string
	// Logger receives what goes wrong on the sandbox's network; nil
	// discards it.
	Logger *slog.Logger
	// MountDirs replaces the host directory of workspace mounts, by the
	// mount's guest path, for this VM only. The mount's rules are
	// unchanged. A guest path that no mount of the sandbox has is an
	// error.
	MountDirs map[string]string
	// Cold boots the sandbox's machine rather than resuming it from the
	// machine saved for its shape (a warm start, the default: the first
	// start of a shape boots and saves one in the cache directory).
	Cold bool
	// MountTransport is how workspace mounts reach the guest: "virtiofs"
	// or "9p"; empty means the environment's SBX_MOUNT_TRANSPORT, and
	// when that is unset too virtio-fs where this host can run it and
	// 9P elsewhere (Sandbox.MountTransport says which).
	MountTransport string
}

func (o StartOptions) internal() pipeline.StartOptions {
	return pipeline.StartOptions{
		BootTimeout: o.BootTimeout,
		Dir:         o.Dir,
		Environ:     o.Environ,
		AuditDir:    o.AuditDir,
		Logger:      o.Logger,
		MountDirs:   o.MountDirs,
		Cold:        o.Cold,

		MountTransport: sandboxfs.Transport(o.MountTransport),
	}
}

// The outputs of an image, the keys of Image.Outputs.
const (
	OutputKernel    = image.OutputKernel
	OutputInitramfs = image.OutputInitramfs
	OutputDisk      = image.OutputDisk
	OutputAgent     = image.OutputAgent
)

// Image is a built image: its files in the cache and what the build
// found in it.
type Image struct {
	// Name is the image block's name.
	Name string
	// InputHash is the recipe input hash the lock records.
	InputHash string
	// BuildKey is "sha256:<hex>" over the input hash, the agent's
	// digest, the epoch and the build format's version; the cache keeps
	// the outputs under it.
	BuildKey string
	// ProvisionHash is the hash of the image's provision steps, and
	// BaseKey the build key of the disk they ran on; both are empty for
	// an image without steps. The disk output is then the provisioned
	// disk, and BuildKey covers the steps too.
	ProvisionHash string
	BaseKey       string
	// Cached is true when the outputs were already in the cache and
	// nothing was fetched or built.
	Cached bool
	// Outputs are keyed by OutputKernel, OutputInitramfs, OutputDisk and
	// OutputAgent.
	Outputs map[string]ImageFile
	// Manifest is the path of image.json, which describes the build.
	Manifest string
	// KernelVersion is the kernel release ("6.1.0-57-amd64").
	KernelVersion string
	// DiskSize is the root filesystem's size in bytes, the disk's
	// virtual size.
	DiskSize int64
	// Packages and Executables are the image's inventory (as image.json
	// has it).
	Packages    []ImagePackage
	Executables []ImageExecutable
}

// ImageFile is one file an image build made.
type ImageFile struct {
	// Path is the file's path in the cache.
	Path string
	// Digest is "sha256:<hex>" of its bytes.
	Digest string
	Size   int64
}

// ImagePackage is a package installed in an image.
type ImagePackage struct {
	Name, Version, Architecture string
}

// ImageExecutable is a command the build found and checked in an
// image, and the path it was found at.
type ImageExecutable struct {
	Name, Path string
}

func imageOf(r *image.Result) *Image {
	img := &Image{
		Name:          r.Image,
		InputHash:     r.InputHash,
		BuildKey:      r.BuildKey,
		ProvisionHash: r.ProvisionHash,
		BaseKey:       r.BaseKey,
		Cached:        r.Cached,
		Outputs:       make(map[string]ImageFile, len(r.Outputs)),
		Manifest:      r.Manifest,
		KernelVersion: r.KernelVersion,
		DiskSize:      r.DiskSize,
	}
	for k, o := range r.Outputs {
		img.Outputs[k] = ImageFile{Path: o.Path, Digest: o.Digest, Size: o.Size}
	}
	for _, p := range r.Packages {
		img.Packages = append(img.Packages, ImagePackage{Name: p.Name, Version: p.Version, Architecture: p.Architecture})
	}
	for _, e := range r.Executables {
		img.Executables = append(img.Executables, ImageExecutable{Name: e.Name, Path: e.Path})
	}
	return img
}

// Lock is a configuration's lock: what sbx.lock.hcl pins.
type Lock struct {
	// Path is the lock file, sbx.lock.hcl in the configuration directory.
	Path string
	// Images is keyed by image block name.
	Images map[string]LockedImage
}

// LockedImage is the lock entry of one image block.
type LockedImage struct {
	// Platform is the image's "os/arch" ("linux/amd64").
	Platform string
	// InputHash is "sha256:<hex>" over the image's recipe: every pin and
	// every setting that affects the image's bytes.
	InputHash string
	// Outputs maps an output name (OutputKernel, OutputInitramfs,
	// OutputDisk) to "sha256:<hex>" of the built file, as sbx build
	// recorded it; empty until sbx build has run.
	Outputs map[string]string
}

func lockOf(path string, l *lockfiles.Lock) *Lock {
	out := &Lock{Path: path, Images: make(map[string]LockedImage, len(l.Images))}
	for name, im := range l.Images {
		out.Images[name] = LockedImage{Platform: im.Platform, InputHash: im.InputHash, Outputs: maps.Clone(im.Outputs)}
	}
	return out
}

// exec runs an internal command with the sandbox's defaults; the eval
// fan-out calls it through evalSandbox.
func (s *Sandbox) exec(ctx context.Context, c guestconn.Cmd) (*guestconn.ExitStatus, error) {
	c, err := s.cmd(c)
	if err != nil {
		return nil, err
	}
	return s.m.Exec(ctx, c)
}
