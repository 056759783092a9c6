package provision

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/policy"
)

// OutputTail is how much of a failed step's output its error keeps: the
// last bytes of its stdout and stderr together.
const OutputTail = 4 << 10

// Provisioner runs provision steps in sandboxes.
type Provisioner struct {
	// Sandbox are the options each provisioning sandbox starts with
	// (its directory, hypervisor, CA, logger). Its Secrets, AuditDir,
	// Snapshots and KeepDisk are not used: the machine has no secrets,
	// keeps no audit log, always boots, and keeps its disk for the
	// image.
	Sandbox sandbox.Options
	// CPUs and Memory size the machine; zero means the machine's
	// defaults.
	CPUs   int
	Memory int64
	// QemuImg is the qemu-img program; empty means "qemu-img" in PATH.
	QemuImg string
}

var _ image.Provisioner = (*Provisioner)(nil)

// Provision boots a machine of req.Base, runs req.Image's provision
// steps in it and writes the disk it leaves to req.Disk.
func (p *Provisioner) Provision(ctx context.Context, req image.ProvisionRequest) (err error) {
	img := req.Image
	if img == nil || len(img.Provision) == 0 {
		return errors.New("provision: no steps to run")
	}
	qemuImg := p.QemuImg
	if qemuImg == "" {
		if qemuImg, err = exec.LookPath("qemu-img"); err != nil {
			return fmt.Errorf("provisioning needs qemu-img to flatten the machine's disk: %w", err)
		}
	}
	work, err := os.MkdirTemp(filepath.Dir(req.Disk), "provision-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	si := &sandbox.Image{
		Image:    img.Name,
		Outputs:  map[string]sandbox.ImageOutput{},
		DiskSize: req.Base.DiskSize,
		Platform: req.Platform,
		Cmdline:  req.Cmdline,
	}
	for _, name := range []string{sandbox.OutputKernel, sandbox.OutputInitramfs, sandbox.OutputDisk} {
		o, ok := req.Base.Outputs[name]
		if !ok {
			return fmt.Errorf("image %q: the base build has no %s", img.Name, name)
		}
		si.Outputs[name] = sandbox.ImageOutput{Path: o.Path, Digest: o.Digest, Size: o.Size}
	}
	spec := sandbox.Spec{
		Name:   "provision-" + img.Name,
		Image:  si,
		CPUs:   p.CPUs,
		Memory: p.Memory,
		User:   "root",
		Policy: stepPolicy(img.Provision[0].Egress),
	}
	opts := p.Sandbox
	opts.Secrets, opts.AuditDir, opts.Snapshots = nil, "", nil
	opts.KeepDisk = filepath.Join(work, "overlay.qcow2")
	sb, err := sandbox.Start(ctx, spec, opts)
	if err != nil {
		return fmt.Errorf("image %q: starting the provisioning machine: %w", img.Name, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, sb.Stop(context.WithoutCancel(ctx)))
		}
	}()
	env := envList(img.Env)
	for i, step := range img.Provision {
		if i > 0 {
			if _, err := sb.Update(ctx, stepPolicy(step.Egress), nil); err != nil {
				return fmt.Errorf("image %q: provision step %q: setting its egress: %w", img.Name, step.Name, err)
			}
		}
		if req.Step != nil {
			req.Step(step.Name)
		}
		if err := runStep(ctx, sb, img.Name, step.Name, step.Run, append(slices.Clone(env), envList(step.Env)...), step.Timeout); err != nil {
			return err
		}
	}
	stopped = true
	if err := sb.Stop(ctx); err != nil {
		return fmt.Errorf("image %q: powering the provisioning machine off: %w", img.Name, err)
	}
	overlay := opts.KeepDisk
	if _, err := os.Stat(overlay); err != nil {
		return fmt.Errorf("image %q: the provisioning machine left no disk: %w", img.Name, err)
	}
	raw := filepath.Join(work, "disk.raw")
	cmd := exec.CommandContext(ctx, qemuImg, "convert", "-q", "-f", "qcow2", "-O", "raw", overlay, raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image %q: flattening the provisioned disk: %v: %s", img.Name, err, out)
	}
	if err := qcow2.ConvertFile(ctx, req.Disk, raw, qcow2.Options{}); err != nil {
		return fmt.Errorf("image %q: provisioned disk: %w", img.Name, err)
	}
	return nil
}

// runStep runs one step as root in / and returns an *image.ProvisionError
// if it does not exit 0 within timeout.
func runStep(ctx context.Context, sb *sandbox.Sandbox, imageName, name string, args, env []string, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &tail{max: OutputTail}
	st, err := sb.Exec(sctx, guestconn.Cmd{Args: args, Env: env, User: "root", Dir: "/", Stdout: out, Stderr: out})
	perr := &image.ProvisionError{Image: imageName, Step: name, ExitCode: -1, Output: out.String()}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case sctx.Err() != nil:
		perr.TimedOut = true
		return perr
	case err != nil:
		perr.Err = err
		return perr
	case st.Code != 0:
		perr.ExitCode = st.Code
		return perr
	}
	return nil
}

// stepPolicy is a step's egress rules as a sandbox policy: nothing else.
func stepPolicy(e policy.Sandbox) policy.Sandbox {
	return policy.Sandbox{Allow: e.Allow, TCP: e.TCP, Hosts: e.Hosts, CAs: e.CAs}
}

// envList is env as "KEY=value" entries, sorted.
func envList(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
