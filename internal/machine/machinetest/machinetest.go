package machinetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/apt/apttest"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

// What the fixture's configuration declares.
const (
	Image   = "box"   // the image block
	Sandbox = "box"   // the sandbox block
	User    = "agent" // the sandbox's user
	UID     = 1000    // its uid
	// Epoch is SOURCE_DATE_EPOCH for the fixture's builds.
	Epoch = 1700000000
)

// Applets are the busybox commands the image links in /bin.
var Applets = []string{
	"sh", "cat", "id", "uname", "head", "sha256sum", "kill", "true", "false",
	"sleep", "echo", "env", "pwd", "ls", "wc", "hostname", "sync", "ps",
	"readlink", "mkdir", "mv", "mount", "umount", "stat", "ip", "ping", "arping", "nc", "wget", "nslookup", "udhcpc", "timeout",
}

// Spec is the fixture's configuration, sbx.hcl.
const Spec = `# A hermetic sandbox for tests: every input is a local file.
locals {
  applets = [%s]
}

image "box" {
  platform = "linux/amd64"
  size     = "256MiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
  }

  artifact "busybox" {
    source  = "file:./busybox.deb"
    dest    = "/"
    extract = true
  }

  symlinks = { for a in local.applets : "/bin/${a}" => "busybox" }

  user "agent" {
    uid = 1000
  }

  file "/etc/motd" {
    content = "sbx test sandbox\n"
  }
}

sandbox "box" {
  image  = image.box
  user   = "agent"
  cpus   = 1
  memory = "512MiB"
}
`

// Fixture is a configuration directory ready to build and boot.
type Fixture struct {
	// Dir is the configuration directory: sbx.hcl, kernel.deb and
	// busybox.deb.
	Dir string
	// Cache is the build cache directory ($SBX_CACHE_DIR).
	Cache string
	// Agent is the guest agent binary ($SBX_GUEST_AGENT).
	Agent string
	// Environ is what the sbx command needs to build here: PATH, HOME,
	// SBX_CACHE_DIR, SBX_GUEST_AGENT and SOURCE_DATE_EPOCH.
	Environ []string
}

// QEMU returns the path of qemu-system-x86_64, or an error saying how to
// install it.
func QEMU() (string, error) {
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return "", errors.New("qemu-system-x86_64 is not on PATH; install the Debian package qemu-system-x86 to run the tests that boot sandboxes")
	}
	return p, nil
}

// New makes a fixture under work, a directory the caller removes: it
// builds the guest agent, fetches the two packages (from the cache when
// they are there) and writes the configuration.
func New(ctx context.Context, work string) (*Fixture, error) {
	f := &Fixture{Dir: filepath.Join(work, "config"), Cache: filepath.Join(work, "cache")}
	for _, d := range []string{f.Dir, f.Cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	var err error
	if f.Agent, err = agentbin.Build(ctx, lang.Platform{OS: "linux", Architecture: "amd64"}, work); err != nil {
		return nil, fmt.Errorf("building the guest agent: %w", err)
	}
	kdeb, err := apttest.DebianKernel(ctx)
	if err != nil {
		return nil, err
	}
	bdeb, err := apttest.Download(ctx, "busybox-static", "")
	if err != nil {
		return nil, err
	}
	for dst, src := range map[string]string{"kernel.deb": kdeb, "busybox.deb": bdeb} {
		if err := linkOrCopy(src, filepath.Join(f.Dir, dst)); err != nil {
			return nil, err
		}
	}
	quoted := make([]string, len(Applets))
	for i, a := range Applets {
		quoted[i] = `"` + a + `"`
	}
	spec := fmt.Sprintf(Spec, strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(f.Dir, "sbx.hcl"), []byte(spec), 0o644); err != nil {
		return nil, err
	}
	f.Environ = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + work,
		cache.EnvRoot + "=" + f.Cache,
		agentbin.EnvVar + "=" + f.Agent,
		fmt.Sprintf("SOURCE_DATE_EPOCH=%d", Epoch),
	}
	return f, nil
}

// Build loads the configuration, locks it (writing sbx.lock.hcl) and
// builds its image into the fixture's cache, through the same pipeline
// the command line and the Go API take, with the fixture's environment.
func (f *Fixture) Build(ctx context.Context) (*lang.Config, *image.Result, error) {
	cfg, diags := lang.Load(f.Dir, lang.Options{})
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("loading %s: %s", f.Dir, diags.Error())
	}
	env := pipeline.Env{Environ: f.Environ}
	l, diags := pipeline.Lock(ctx, cfg, env, pipeline.LockOptions{})
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("locking %s: %s", f.Dir, diags.Error())
	}
	opts, err := pipeline.ImageOptions(f.Dir, env)
	if err != nil {
		return nil, nil, err
	}
	r, err := pipeline.Build(ctx, cfg, l.Lock, Image, opts)
	if err != nil {
		return nil, nil, err
	}
	return cfg, r, nil
}

// shared is the one fixture and build of a test binary.
var shared struct {
	once  sync.Once
	work  string
	fix   *Fixture
	cfg   *lang.Config
	image *image.Result
	err   error
}

// Require returns the test binary's fixture, built once, and its
// configuration and image. When QEMU is missing it fails the test, or
// skips it when SBX_SKIP_VM_TESTS=1 (see qemutest.Require); it fails the
// test when the fixture cannot be made. Call Cleanup from TestMain to
// remove it.
func Require(t testing.TB) (*Fixture, *lang.Config, *image.Result) {
	t.Helper()
	qemutest.Require(t)
	shared.once.Do(func() {
		shared.work, shared.err = os.MkdirTemp("", "sbx-machinetest-")
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if shared.fix, shared.err = New(ctx, shared.work); shared.err != nil {
			return
		}
		shared.cfg, shared.image, shared.err = shared.fix.Build(ctx)
	})
	if shared.err != nil {
		t.Fatalf("making the test sandbox: %v", shared.err)
	}
	return shared.fix, shared.cfg, shared.image
}

// Cleanup removes what Require made.
func Cleanup() {
	if shared.work != "" {
		os.RemoveAll(shared.work)
	}
}

func linkOrCopy(src, dst string) error {
	// dst may be a link to src from an earlier run: writing through it
	// would truncate src.
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
