package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/internal/snapshot"
)

// How a sandbox's machine started (Started.How).
const (
	// Cold: booted from the image.
	Cold = "cold"
	// Warm: resumed from the saved machine of its shape.
	Warm = "warm"
	// Saved: no saved machine of its shape was there: one was booted
	// and saved, and the sandbox resumed from it.
	Saved = "saved"
)

// Started says how a sandbox's machine started.
type Started struct {
	// How is Cold, Warm or Saved.
	How string
	// Took is the time from Start's call to a configured guest.
	Took time.Duration
	// Warning says why a warm start was not made, when one was to be
	// (a snapshot that did not verify or resume): the sandbox then
	// booted cold.
	Warning string
	// Snapshot is the key of the snapshot the machine resumed from.
	Snapshot string
	// Load is the time finding and verifying the snapshot took (its
	// files' digests and the sealed copy of its memory); about zero
	// when this process's cache had loaded it already, and for a
	// Saved start, whose Save includes it.
	Load time.Duration
	// Save is the time a Saved start took to boot, save and load the
	// snapshot.
	Save time.Duration
	// Machine is the machine's start, part by part.
	Machine machine.Timings
	// Configure is the time the guest took to apply the configure
	// request (its identity, network, placeholders and mounts).
	Configure time.Duration
	// Mounts is how the mounts reached the guest (Options.MountTransport),
	// empty when there are none; MountsNote says why they went over 9P
	// when virtio-fs could not run here.
	Mounts     sandboxfs.Transport
	MountsNote string
}

// warmMAC is the network address of every machine saved for warm starts
// and resumed from one: each sandbox has a network of its own, so they
// need not differ.
const warmMAC = "52:54:00:5b:78:01"

// startMachine starts the sandbox's machine: resumed from the saved
// machine of its shape when opts.Snapshots is set (saving one first if
// the cache has none), booted otherwise, or when the warm start fails
// for another reason than ctx (Started.Warning says why). The boot
// after a failed warm start is on the network renew returns: the
// machine that failed may have been served mopts.Network, and a network
// serves one machine.
func startMachine(ctx context.Context, spec Spec, opts Options, renew func() (machine.Network, error), mopts machine.Options) (*machine.Machine, Started, error) {
	if opts.Snapshots == nil || opts.benchmarking() || opts.KeepDisk != "" {
		m, err := machine.Start(ctx, mopts)
		return m, Started{How: Cold}, err
	}
	if mopts.Hypervisor == nil {
		// The shape names the hypervisor the machine runs on.
		mopts.Hypervisor = machine.DefaultHypervisor()
	}
	if _, ok := mopts.Hypervisor.(machine.Snapshotter); !ok {
		// Not a failure: this hypervisor has no warm starts.
		m, err := machine.Start(ctx, mopts)
		return m, Started{How: Cold}, err
	}
	m, st, err := startWarm(ctx, spec.Image, opts, mopts)
	if err == nil {
		return m, st, nil
	}
	if ctx.Err() != nil {
		return nil, st, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("warm start failed; booting", "sandbox", spec.Name, "error", err)
	warning := "warm start failed, booted instead: " + err.Error()
	if mopts.Network != nil {
		if mopts.Network, err = renew(); err != nil {
			return nil, Started{How: Cold, Warning: warning}, err
		}
	}
	m, err = machine.Start(ctx, mopts)
	return m, Started{How: Cold, Warning: warning}, err
}

// startWarm resumes the machine from the snapshot of its shape, making
// the snapshot first if there is none.
func startWarm(ctx context.Context, img *Image, opts Options, mopts machine.Options) (*machine.Machine, Started, error) {
	st := Started{How: Warm}
	shape, err := shapeOf(ctx, img, mopts)
	if err != nil {
		st.Warning = err.Error()
		return nil, st, err
	}
	st.Snapshot = shape.Key()
	mark := time.Now()
	snap, err := opts.Snapshots.Get(shape)
	st.Load = time.Since(mark)
	if errors.Is(err, snapshot.ErrMissing) {
		st.How = Saved
		mark = time.Now()
		snap, err = opts.Snapshots.Create(ctx, shape, func(ctx context.Context, memory string, state *os.File, disk string) (snapshot.Saved, error) {
			return saveMachine(ctx, mopts, memory, state, disk)
		})
		st.Save = time.Since(mark)
	}
	if err != nil {
		st.Warning = err.Error()
		return nil, st, err
	}
	r, err := snap.Resume()
	if err != nil {
		st.Warning = err.Error()
		return nil, st, err
	}
	defer r.State.Close()
	if bootproto.CheckHostname(mopts.Name) == nil {
		// The name identity gives the guest after the resume.
		r.Ready.Hostname = mopts.Name
	}
	mopts.Resume = r
	m, err := machine.Start(ctx, mopts)
	if err != nil {
		if ctx.Err() == nil {
			// A snapshot that verified and does not resume is of no
			// use to the next start either.
			opts.Snapshots.Discard(shape)
		}
		st.Warning = err.Error()
		return nil, st, err
	}
	return m, st, nil
}

// shapeOf is the snapshot shape of the machine mopts describes.
func shapeOf(ctx context.Context, img *Image, mopts machine.Options) (snapshot.Shape, error) {
	snap, ok := mopts.Hypervisor.(machine.Snapshotter)
	if !ok {
		return snapshot.Shape{}, errors.New("the hypervisor cannot save machines")
	}
	b := mopts.Boot
	id, err := snap.StateID(ctx, b.Platform.Architecture)
	if err != nil {
		return snapshot.Shape{}, err
	}
	digests := map[string]string{}
	for _, out := range []string{OutputKernel, OutputInitramfs, OutputDisk} {
		d := img.Outputs[out].Digest
		if d == "" {
			return snapshot.Shape{}, fmt.Errorf("no digest of the image's %s", out)
		}
		digests[out] = d
	}
	cpus, memory := mopts.CPUs, mopts.Memory
	if cpus <= 0 {
		cpus = machine.DefaultCPUs
	}
	if memory <= 0 {
		memory = machine.DefaultMemory
	}
	memory = (memory + 1<<20 - 1) &^ (1<<20 - 1)
	// The saved disk's backing file is the disk by this path
	// (machine.Start makes the overlay over its absolute path).
	diskPath, err := filepath.Abs(b.Disk)
	if err != nil {
		return snapshot.Shape{}, err
	}
	return snapshot.Shape{
		Kernel: digests[OutputKernel], Initrd: digests[OutputInitramfs], Disk: digests[OutputDisk], DiskPath: diskPath,
		Platform: b.Platform.String(), Cmdline: b.Cmdline,
		CPUs: cpus, Memory: memory,
		Ports:      slices.Sorted(maps.Keys(mopts.Ports)),
		FSSlots:    mopts.FSSlots,
		Hypervisor: id,
	}, nil
}

// saveMachine boots the machine mopts describes, as no sandbox yet (no
// network, no one serving its ports, the image's host name), and saves
// it once its agent answers.
func saveMachine(ctx context.Context, mopts machine.Options, memory string, state *os.File, disk string) (snapshot.Saved, error) {
	o := mopts
	o.Name = "warm"
	o.Hostname = bootproto.DefaultHostname
	o.MAC = warmMAC
	o.MemoryFile = memory
	o.Network = nil
	o.KeepConsole = ""
	o.Ports = map[string]machine.Port{}
	for name := range mopts.Ports {
		o.Ports[name] = idlePort{}
	}
	m, err := machine.Start(ctx, o)
	if err != nil {
		return snapshot.Saved{}, err
	}
	if !m.Client().Guest().Has(agentproto.CapIdentity) {
		m.Stop(context.WithoutCancel(ctx))
		return snapshot.Saved{}, errors.New("the image's guest agent cannot take a sandbox's identity after a resume (an image built by an older sbx): rebuild it")
	}
	saved := snapshot.Saved{MAC: warmMAC, Ready: m.Ready()}
	return saved, m.Save(ctx, state, disk)
}

// idlePort is a port nobody serves yet: the saved guest never opens it.
type idlePort struct{}

func (idlePort) Serve(ctx context.Context, conn net.Conn) error { return nil }

// identity is what makes a resumed guest this sandbox: its name, the
// host's clock and fresh entropy.
func identity(name string) (*agentproto.Identity, error) {
	id := &agentproto.Identity{TimeUnixNano: time.Now().UnixNano(), Entropy: make([]byte, 64)}
	if bootproto.CheckHostname(name) == nil {
		id.Hostname = name
	}
	if _, err := rand.Read(id.Entropy); err != nil {
		return nil, err
	}
	return id, nil
}
