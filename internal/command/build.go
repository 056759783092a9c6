package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
)

const buildUsage = `
Usage: sbx build [options] [DIR] [IMAGE...]

  Build images of the configuration in DIR (default: the current
  directory; a first argument that is a directory is DIR): every image, or
  the IMAGE names given. Each build fetches the locked inputs into the
  cache, assembles the root filesystem and writes the kernel, the
  initramfs (the guest agent and kernel modules) and the root disk (ext4
  in qcow2). Outputs are kept in the cache ($SBX_CACHE_DIR, by default the
  sbx directory in the user cache directory) under a key over everything
  that decides their bytes, so building again is a cache hit that fetches
  and builds nothing.

  Builds are reproducible: every timestamp is $SOURCE_DATE_EPOCH (0 when
  unset). The output hashes are recorded in sbx.lock.hcl; with
  -lockfile=readonly a hash that differs from the recorded one (or none
  recorded) is an error, which is how CI checks that an image rebuilds to
  the committed bytes.

  If the lock file is missing pins the configuration needs, they are
  resolved and sbx.lock.hcl is updated first, as "sbx lock" would;
  -lockfile=readonly makes that an error instead.

  The guest agent binary is $SBX_GUEST_AGENT (a file, or a directory
  holding sbx-guest-OS-ARCH), or else sbx-guest-OS-ARCH beside sbx.

Options:

  -verify             Rebuild from scratch, ignoring cached outputs, and
                      fail naming every output whose hash differs from the
                      cached build or the lock file.
  -format FORMAT      qemu (default): kernel, initramfs and qcow2 disk.
                      gondolin: a Gondolin guest-asset directory
                      (vmlinuz-virt, initramfs.cpio.lz4, rootfs.ext4,
                      manifest.json); needs -o, and records no hashes.
  -o DIR              Write the outputs to DIR (for one image) or DIR/IMAGE
                      (for several) instead of only keeping them in the
                      cache.
  -lockfile=readonly  Never update sbx.lock.hcl; fail if it is not up to
                      date or records other output hashes.
` + varUsage + `  -no-color           Print without colour.
`

type buildArgs struct {
	dir      string
	images   []string
	verify   bool
	format   string
	out      string
	lockfile lockfileMode
	vars     varFlags
	noColor  bool
}

func runBuild(ctx context.Context, env *Env, args []string) int {
	var a buildArgs
	flags := newFlagSet("build")
	flags.BoolVar(&a.verify, "verify", false, "")
	flags.StringVar(&a.format, "format", "qemu", "")
	flags.StringVar(&a.out, "o", "", "")
	flags.Var(&a.lockfile, "lockfile", "")
	a.vars.register(flags)
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, buildUsage, args)
	if !ok {
		return code
	}
	a.dir, a.images = ".", pos
	if len(pos) > 0 {
		if fi, err := os.Stat(pos[0]); err == nil && fi.IsDir() {
			a.dir, a.images = pos[0], pos[1:]
		}
	}
	switch a.format {
	case "qemu":
	case "gondolin":
		if a.out == "" {
			newView(env, a.noColor).usageError("build", "Missing -o", "-format gondolin needs -o DIR, the directory to write the guest assets to.")
			return ExitError
		}
		if a.verify {
			newView(env, a.noColor).usageError("build", "Conflicting options", "-verify checks the qemu outputs; it cannot be combined with -format gondolin.")
			return ExitError
		}
	default:
		newView(env, a.noColor).usageError("build", "Invalid -format", fmt.Sprintf("Unknown -format %q; the formats are qemu and gondolin.", a.format))
		return ExitError
	}
	v := newView(env, a.noColor)

	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	cfg, ok := loadConfig(v, a.dir, a.vars.options(env))
	if !ok {
		return ExitError
	}
	names, ok := imagesToBuild(v, cfg, a.images)
	if !ok {
		return ExitError
	}
	opts, ok := buildOptions(env, v, cfg)
	if !ok {
		return ExitError
	}
	lock, ok := lockForPlan(ctx, env, v, cfg, a.lockfile == "readonly")
	if !ok {
		return failedOrInterrupted(ctx, env, "the lock file was left as it was")
	}

	results := map[string]*image.Result{}
	failed := false
	for _, name := range names {
		img := cfg.Images[name]
		p := newBuildProgress(env.Stderr, addrs.ImageRef(name).String())
		opts.Stage = p.stage
		opts.ProvisionStep = p.step
		opts.Fetch.Progress = p.bytes
		opts.Verify = a.verify
		start := time.Now()
		out := a.out
		if out != "" && len(names) > 1 {
			out = filepath.Join(out, name)
		}
		if a.format == "gondolin" {
			err := image.ExportGondolin(ctx, img, lock.Lookup(name), out, opts)
			p.done()
			if err != nil && ctx.Err() != nil {
				return interrupted(env, fmt.Sprintf("%s was not written", out))
			}
			if err != nil {
				v.errorFrom(fmt.Sprintf("Cannot build %s", p.addr), err, false)
				failed = true
				continue
			}
			v.println("%s: Gondolin guest assets in %s (%s)", v.bold(p.addr), out, since(start))
			continue
		}
		r, err := pipeline.Build(ctx, cfg, lock, name, opts)
		p.done()
		if err != nil && ctx.Err() != nil {
			return interrupted(env, fmt.Sprintf("nothing of %s was stored in the cache, and the lock file was left as it was", p.addr))
		}
		var verr *image.VerifyError
		if errors.As(err, &verr) && verr.NotHermetic() {
			v.errorDetail(fmt.Sprintf("%s is not hermetic: its provision steps gave another disk", p.addr), verr.Error())
			failed = true
			continue
		}
		if errors.As(err, &verr) {
			v.errorDetail(fmt.Sprintf("%s is not reproducible: %s differ", p.addr, strings.Join(verr.Outputs(), ", ")), verr.Error())
			failed = true
			continue
		}
		if err != nil {
			v.errorFrom(fmt.Sprintf("Cannot build %s", p.addr), err, false)
			failed = true
			continue
		}
		if out != "" {
			if r, err = r.CopyTo(ctx, out); err != nil && ctx.Err() != nil {
				return interrupted(env, fmt.Sprintf("%s is in the cache; its copy in %s was not made", p.addr, out))
			}
			if err != nil {
				v.errorDetail(fmt.Sprintf("Cannot write the outputs of %s", p.addr), err.Error())
				failed = true
				continue
			}
		}
		results[name] = r
		printResult(v, p.addr, r, a.verify, since(start))
	}
	if a.format == "qemu" && len(results) > 0 {
		if !recordOutputs(ctx, env, v, cfg, lock, results, a.lockfile == "readonly") {
			failed = true
		}
	}
	if failed {
		return ExitError
	}
	return ExitOK
}

// interrupted reports that the command was interrupted (Ctrl-C,
// SIGTERM) and what that left behind, and returns ExitInterrupted.
func interrupted(env *Env, left string) int {
	fmt.Fprintf(env.Stderr, "\nInterrupted: %s.\n", left)
	return ExitInterrupted
}

// failedOrInterrupted is the exit code of a step that failed, its error
// already printed: ExitInterrupted, reported as interrupted, when ctx
// ended, else ExitError.
func failedOrInterrupted(ctx context.Context, env *Env, left string) int {
	if ctx.Err() != nil {
		return interrupted(env, left)
	}
	return ExitError
}

// imagesToBuild returns the images named, or all of cfg's, sorted.
func imagesToBuild(v *view, cfg *lang.Config, named []string) ([]string, bool) {
	all := slices.Sorted(maps.Keys(cfg.Images))
	if len(named) == 0 {
		if len(all) == 0 {
			v.errorf("The configuration in %s declares no image", cfg.Dir)
			return nil, false
		}
		return all, true
	}
	var names []string
	for _, n := range named {
		n = strings.TrimPrefix(n, "image.")
		if _, ok := cfg.Images[n]; !ok {
			v.errorDetail(fmt.Sprintf("No image %q in the configuration", n), "The images are: "+strings.Join(all, ", "))
			return nil, false
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, true
}

// buildOptions are the image build options from the environment, as
// every entry point of the pipeline takes them. Errors are printed.
func buildOptions(env *Env, v *view, cfg *lang.Config) (image.Options, bool) {
	opts, err := pipeline.ImageOptions(cfg.Dir, env.pipeline())
	if err != nil {
		v.errorf("Cannot set up the build: %v", err)
		return opts, false
	}
	return opts, true
}

// printResult prints where a build's outputs are.
func printResult(v *view, addr string, r *image.Result, verified bool, took string) {
	how := "built"
	if r.Cached {
		how = "cached"
	}
	if verified {
		how = "verified: it rebuilds to the same bytes"
	}
	v.println("%s: %s (%s, %s)", v.bold(addr), how, r.KernelVersion, took)
	for _, name := range []string{image.OutputKernel, image.OutputInitramfs, image.OutputDisk, image.OutputAgent} {
		if o, ok := r.Outputs[name]; ok {
			v.println("  %-10s %s  %s", name, o.Path, o.Digest)
		}
	}
	v.println("  %-10s %s", "manifest", r.Manifest)
	if len(r.Packages) > 0 || len(r.Executables) > 0 {
		var names []string
		for _, e := range r.Executables {
			names = append(names, termtext.Line(e.Name)+" "+termtext.Line(e.Path))
		}
		line := fmt.Sprintf("%d packages", len(r.Packages))
		if len(names) > 0 {
			line += "; executables " + strings.Join(names, ", ")
		}
		v.println("  %-10s %s (sbx show %s lists them)", "inventory", line, r.Manifest)
	}
}

// recordOutputs records the built output hashes in the lock file
// (operation.RecordOutputs), printing what it wrote and its errors. It
// reports whether they were recorded.
func recordOutputs(ctx context.Context, env *Env, v *view, cfg *lang.Config, lock *lockfiles.Lock, results map[string]*image.Result, readonly bool) bool {
	ds := operation.RecordOutputs(newHooks(ctx, env, v), cfg, lock, results, readonly)
	v.render(nil, ds)
	return !ds.HasErrors()
}

func since(start time.Time) string {
	return time.Since(start).Round(100 * time.Millisecond).String()
}

// buildProgress shows a build's stages on stderr, one line each, and on a
// terminal the download of each input as one line rewritten in place.
type buildProgress struct {
	w    io.Writer
	tty  bool
	addr string

	mu    sync.Mutex
	open  bool // a download line is on screen, not ended
	key   string
	start time.Time
	last  time.Time
}

func newBuildProgress(w io.Writer, addr string) *buildProgress {
	_, tty := terminalFD(w)
	return &buildProgress{w: w, tty: tty, addr: addr}
}

func (p *buildProgress) stage(s image.Stage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLine()
	if s == image.StageCached {
		fmt.Fprintf(p.w, "%s: found in the cache\n", p.addr)
		return
	}
	fmt.Fprintf(p.w, "%s: %s…\n", p.addr, s)
}

// step is the provisioning's progress callback: a step starts.
func (p *buildProgress) step(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLine()
	fmt.Fprintf(p.w, "%s: provision step %q…\n", p.addr, name)
}

// bytes is fetch's progress callback.
func (p *buildProgress) bytes(key string, done, total int64) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if key != p.key {
		p.endLine()
		p.key, p.start = key, now
	}
	finished := total > 0 && done >= total
	if !finished && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	rate := ""
	if el := now.Sub(p.start).Seconds(); el > 0.2 {
		rate = "  " + humanBytes(int64(float64(done)/el)) + "/s"
	}
	of := ""
	if total > 0 {
		of = " / " + humanBytes(total)
	}
	fmt.Fprintf(p.w, "\r\x1b[K  %s  %s%s%s", key, humanBytes(done), of, rate)
	p.open = true
}

func (p *buildProgress) endLine() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
	p.key = ""
}

func (p *buildProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLine()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
