package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/aptkernel"
	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/lang"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags say.
type config struct {
	work     string
	rounds   int
	packages []string
	check    string
	kernel   string // a kernel .deb; "" means the host's apt candidate
	size     string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("pkgbench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var c config
	flags.StringVar(&c.work, "work", "", "work directory (created; a few GB are written to it)")
	flags.IntVar(&c.rounds, "rounds", 3, "timed rounds")
	pkgs := flags.String("packages", "git,ca-certificates", "the image's packages, comma-separated")
	flags.StringVar(&c.check, "check", "/usr/bin/git", "a file both disks must hold")
	flags.StringVar(&c.kernel, "kernel", "", "kernel .deb for the image (default: the host's linux-image-amd64 candidate, downloaded in round 0)")
	flags.StringVar(&c.size, "size", "1GiB", "image size")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	for _, p := range strings.Split(*pkgs, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.packages = append(c.packages, p)
		}
	}
	if c.work == "" || flags.NArg() > 0 || c.rounds < 1 || len(c.packages) == 0 {
		fmt.Fprintln(stderr, "usage: go run ./bench/pkgbench -work DIR [-rounds N] [-packages a,b] [-check PATH] [-kernel FILE.deb] [-size SIZE]")
		return 2
	}
	b := &bench{config: c, log: stderr}
	if err := b.run(ctx); err != nil {
		fmt.Fprintf(stderr, "pkgbench: %v\n", err)
		return 1
	}
	b.table(stdout)
	return 0
}

// pkg is one locked package.
type pkg struct {
	name, version, arch, sha256, filename string
	size                                  int64
}

// aptName is the file name apt-get download gives the package.
func (p pkg) aptName() string {
	return p.name + "_" + strings.ReplaceAll(p.version, ":", "%3a") + "_" + p.arch + ".deb"
}

// round is one timed round's figures.
type round struct {
	sbxResolve, sbxBuild time.Duration
	stdResolve           time.Duration
	stdDownload          time.Duration
	stdExtract           time.Duration
	stdMkfs              time.Duration
	stdQcow2             time.Duration
	// CPU time (user and system) of this process and its children, less
	// sensitive than wall time to other work on a shared machine.
	sbxResolveCPU, sbxBuildCPU time.Duration
	stdResolveCPU, stdBuildCPU time.Duration
}

func (r round) stdBuild() time.Duration {
	return r.stdDownload + r.stdExtract + r.stdMkfs + r.stdQcow2
}

// produced is what one side made in the last round.
type produced struct {
	packages  int
	treeBytes int64 // regular files' content (standard side only)
	qcow2     int64
	checked   string // debugfs's type of the checked file
}

type bench struct {
	config
	log io.Writer

	cfgDir    string
	agent     string
	lockBytes []byte
	buildKey  string
	pkgs      []pkg
	debBytes  int64
	imageSize int64
	results   []round
	sbxOut    produced
	stdOut    produced
	aptOnly   []string // in apt's resolution, not sbx's
	sbxOnly   []string // in sbx's resolution, not apt's
}

func (b *bench) path(elem ...string) string {
	return filepath.Join(append([]string{b.work}, elem...)...)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "pkgbench: "+format+"\n", args...)
}

func (b *bench) run(ctx context.Context) error {
	for _, tool := range []string{"apt-get", "dpkg-deb", "mke2fs", "debugfs", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH", tool)
		}
	}
	if err := os.MkdirAll(b.work, 0o755); err != nil {
		return err
	}
	work, err := filepath.Abs(b.work)
	if err != nil {
		return err
	}
	b.work = work
	if err := b.setup(ctx); err != nil {
		return err
	}
	for i := 1; i <= b.rounds; i++ {
		var r round
		sides := []func(context.Context, int, *round) error{b.sbxRound, b.stdRound}
		if i%2 == 0 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(ctx, i, &r); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		b.logf("round %d: sbx resolve %v build %v (CPU %v, %v); standard resolve %v build %v (CPU %v, %v)", i,
			r.sbxResolve.Round(time.Millisecond), r.sbxBuild.Round(time.Millisecond),
			r.sbxResolveCPU.Round(time.Millisecond), r.sbxBuildCPU.Round(time.Millisecond),
			r.stdResolve.Round(time.Millisecond), r.stdBuild().Round(time.Millisecond),
			r.stdResolveCPU.Round(time.Millisecond), r.stdBuildCPU.Round(time.Millisecond))
		b.results = append(b.results, r)
		if err := os.RemoveAll(b.path(fmt.Sprint(i))); err != nil {
			return err
		}
	}
	return nil
}

// env is the build environment with its cache at cacheDir.
func (b *bench) env(cacheDir string) pipeline.Env {
	return pipeline.Env{Environ: append(os.Environ(),
		cache.EnvRoot+"="+cacheDir,
		agentbin.EnvVar+"="+b.agent,
		"SOURCE_DATE_EPOCH=0",
	)}
}

// setup writes the spec and makes round 0: lock and build into the warm
// cache, then the .debs under apt's names.
func (b *bench) setup(ctx context.Context) error {
	b.cfgDir = b.path("config")
	if err := os.MkdirAll(b.cfgDir, 0o755); err != nil {
		return err
	}
	os.Remove(filepath.Join(b.cfgDir, lockfiles.FileName))
	var err error
	b.logf("building the guest agent")
	if b.agent, err = agentbin.Build(ctx, lang.Platform{OS: "linux", Architecture: "amd64"}, b.path("bin")); err != nil {
		return fmt.Errorf("building the guest agent: %w", err)
	}
	kernelSource := "file:./kernel.deb"
	if b.kernel != "" {
		if err := linkOrCopy(b.kernel, filepath.Join(b.cfgDir, "kernel.deb")); err != nil {
			return err
		}
	} else {
		name, version, err := aptkernel.Package()
		if err != nil {
			return err
		}
		kernelSource = "deb:" + name + "=" + version
	}
	if err := os.WriteFile(filepath.Join(b.cfgDir, "sbx.hcl"), []byte(spec(b.packages, b.size, kernelSource)), 0o644); err != nil {
		return err
	}
	warm := b.path("warm")
	if err := os.RemoveAll(warm); err != nil {
		return err
	}
	b.logf("round 0 (not timed): lock and build into %s", warm)
	cfg, l, err := b.lock(ctx, warm, nil)
	if err != nil {
		return err
	}
	res, err := b.build(ctx, cfg, l, warm)
	if err != nil {
		return err
	}
	b.buildKey = res.BuildKey
	if b.lockBytes, err = os.ReadFile(filepath.Join(b.cfgDir, lockfiles.FileName)); err != nil {
		return err
	}
	img := l.Lookup("bench")
	b.imageSize = cfg.Images["bench"].Size
	for key, p := range img.Inputs {
		if !strings.HasPrefix(key, lockfiles.PackageKeyPrefix) || p.Kind != lockfiles.KindDebPackage {
			continue
		}
		q := pkg{name: strings.TrimPrefix(key, lockfiles.PackageKeyPrefix), version: p.Version, arch: p.Architecture, sha256: p.SHA256, filename: p.Filename}
		fmt.Sscan(p.Size, &q.size)
		b.debBytes += q.size
		b.pkgs = append(b.pkgs, q)
	}
	sort.Slice(b.pkgs, func(i, j int) bool { return b.pkgs[i].name < b.pkgs[j].name })
	if len(b.pkgs) == 0 {
		return errors.New("the lock pins no packages")
	}
	// The standard side's warm download directory: sbx's verified
	// blobs under the names apt-get download writes.
	debs := b.path("debs")
	if err := os.RemoveAll(debs); err != nil {
		return err
	}
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	wc, err := cache.Open(warm)
	if err != nil {
		return err
	}
	for _, p := range b.pkgs {
		src, ok := wc.Path(p.sha256)
		if !ok {
			return fmt.Errorf("package %s=%s is not in the warm cache", p.name, p.version)
		}
		if err := linkOrCopy(src, filepath.Join(debs, p.aptName())); err != nil {
			return err
		}
	}
	b.logf("round 0: %d packages, %d MB of .debs", len(b.pkgs), b.debBytes/1e6)
	return nil
}

// spec is the benchmark's configuration.
func spec(packages []string, size, kernelSource string) string {
	q := make([]string, len(packages))
	for i, p := range packages {
		q[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf(`image "bench" {
  platform = "linux/amd64"
  size     = %q

  kernel {
    source = %q
    file   = "boot/vmlinuz-*"
  }

  packages = [%s]
}
`, size, kernelSource, strings.Join(q, ", "))
}

// lock loads the configuration and brings its lock up to date with the
// cache at cacheDir; old, when not nil, is written as the lock file
// first.
func (b *bench) lock(ctx context.Context, cacheDir string, old *lockfiles.Lock) (*lang.Config, *lockfiles.Lock, error) {
	if old != nil {
		if err := lockfiles.Write(filepath.Join(b.cfgDir, lockfiles.FileName), old); err != nil {
			return nil, nil, err
		}
	}
	cfg, diags := lang.Load(b.cfgDir, lang.Options{})
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("loading %s: %s", b.cfgDir, diags.Error())
	}
	l, diags := pipeline.Lock(ctx, cfg, b.env(cacheDir), pipeline.LockOptions{IfStale: true})
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("locking %s: %s", b.cfgDir, diags.Error())
	}
	return cfg, l.Lock, nil
}

func (b *bench) build(ctx context.Context, cfg *lang.Config, l *lockfiles.Lock, cacheDir string) (*image.Result, error) {
	opts, err := pipeline.ImageOptions(b.cfgDir, b.env(cacheDir))
	if err != nil {
		return nil, err
	}
	opts.TempDir = b.work
	// Each stage's time goes to the log, to show where sbx's build time
	// goes and that the kernel part came from the cache.
	var last image.Stage
	var since time.Time
	opts.Stage = func(s image.Stage) {
		if last != "" {
			b.logf("  sbx %s: %v", last, time.Since(since).Round(time.Millisecond))
		}
		last, since = s, time.Now()
	}
	r, err := pipeline.Build(ctx, cfg, l, "bench", opts)
	if last != "" {
		b.logf("  sbx %s: %v", last, time.Since(since).Round(time.Millisecond))
	}
	return r, err
}

// withoutPackages is round 0's lock with the package pins removed, so
// that locking resolves the closure again and nothing else.
func (b *bench) withoutPackages() (*lockfiles.Lock, error) {
	l, diags := lockfiles.Parse(b.lockBytes, lockfiles.FileName)
	if diags.HasErrors() {
		return nil, diags
	}
	img := l.Lookup("bench")
	for key := range img.Inputs {
		if key == lockfiles.PackagesKey || strings.HasPrefix(key, lockfiles.PackageKeyPrefix) {
			delete(img.Inputs, key)
		}
	}
	return l, nil
}

// seed makes a fresh cache at dir holding round 0's inputs and its
// kernel part, by hard links, but not the image's own outputs.
func (b *bench) seed(dir string) error {
	warm := b.path("warm")
	return filepath.WalkDir(warm, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(warm, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.Contains(rel, strings.TrimPrefix(b.buildKey, "sha256:")) || rel == "tmp" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return linkOrCopy(p, filepath.Join(dir, rel))
	})
}

// sbxRound times sbx's lock and build.
func (b *bench) sbxRound(ctx context.Context, i int, r *round) error {
	cacheDir := b.path(fmt.Sprint(i), "cache")
	if err := b.seed(cacheDir); err != nil {
		return fmt.Errorf("seeding the cache: %w", err)
	}
	old, err := b.withoutPackages()
	if err != nil {
		return err
	}
	if err := lockfiles.Write(filepath.Join(b.cfgDir, lockfiles.FileName), old); err != nil {
		return err
	}
	runtime.GC()
	start, cpu := time.Now(), cpuTime()
	cfg, l, err := b.lock(ctx, cacheDir, nil)
	if err != nil {
		return err
	}
	r.sbxResolve, r.sbxResolveCPU = time.Since(start), cpuTime()-cpu
	if got, err := os.ReadFile(filepath.Join(b.cfgDir, lockfiles.FileName)); err != nil {
		return err
	} else if !bytes.Equal(got, b.lockBytes) {
		return errors.New("sbx resolved a different lock than in round 0")
	}
	runtime.GC()
	start, cpu = time.Now(), cpuTime()
	res, err := b.build(ctx, cfg, l, cacheDir)
	if err != nil {
		return err
	}
	r.sbxBuild, r.sbxBuildCPU = time.Since(start), cpuTime()-cpu
	if res.Cached {
		return errors.New("sbx found the image in a cache that should not hold it")
	}
	disk := res.Outputs[image.OutputDisk]
	raw := b.path(fmt.Sprint(i), "sbx.raw")
	if err := command(ctx, "", "qemu-img", "convert", "-f", "qcow2", "-O", "raw", disk.Path, raw); err != nil {
		return err
	}
	typ, err := fileType(ctx, raw, b.check)
	if err != nil {
		return fmt.Errorf("sbx's disk: %w", err)
	}
	b.sbxOut = produced{packages: len(res.Packages), qcow2: disk.Size, checked: typ}
	return os.Remove(raw)
}

// stdRound times the standard tools.
func (b *bench) stdRound(ctx context.Context, i int, r *round) error {
	dir := b.path(fmt.Sprint(i), "std")
	dl, root := filepath.Join(dir, "download"), filepath.Join(dir, "root")
	for _, d := range []string{dl, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	status := filepath.Join(dir, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return err
	}
	args := []string{"install", "--simulate", "-q", "-o", "Debug::NoLocking=1", "-o", "APT::Install-Recommends=false",
		"-o", "Dir::State::status=" + status, "-o", "Dir::State::extended_states=" + filepath.Join(dir, "extended_states"),
		"-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache="}
	args = append(append(args, b.packages...), "?essential", "?priority(required)")
	start, cpu := time.Now(), cpuTime()
	out, err := exec.CommandContext(ctx, "apt-get", args...).Output()
	r.stdResolve, r.stdResolveCPU = time.Since(start), cpuTime()-cpu
	if err != nil {
		return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), exitErr(err))
	}
	b.compare(parseSimulate(out))

	inodes := map[string]uint64{}
	for _, p := range b.pkgs {
		dst := filepath.Join(dl, p.aptName())
		if err := linkOrCopy(b.path("debs", p.aptName()), dst); err != nil {
			return err
		}
		if inodes[p.aptName()], err = inode(dst); err != nil {
			return err
		}
	}
	dlArgs := []string{"download", "-q", "-o", "Debug::NoLocking=1"}
	for _, p := range b.pkgs {
		dlArgs = append(dlArgs, p.name+"="+p.version)
	}
	start, cpu = time.Now(), cpuTime()
	if err := command(ctx, dl, "apt-get", dlArgs...); err != nil {
		return err
	}
	r.stdDownload = time.Since(start)
	for name, ino := range inodes {
		// A file apt-get replaced was fetched again: its hash was not
		// the archive's, or apt did not take it as downloaded.
		if got, err := inode(filepath.Join(dl, name)); err != nil || got != ino {
			return fmt.Errorf("apt-get download replaced %s (%v)", name, err)
		}
	}

	start = time.Now()
	for _, p := range b.pkgs {
		if err := command(ctx, "", "dpkg-deb", "-x", filepath.Join(dl, p.aptName()), root); err != nil {
			return err
		}
	}
	r.stdExtract = time.Since(start)

	raw, qcow := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	start = time.Now()
	if err := command(ctx, "", "mke2fs", "-q", "-F", "-t", "ext4", "-d", root, "-L", image.DiskLabel, raw, fmt.Sprintf("%dk", b.imageSize>>10)); err != nil {
		return err
	}
	r.stdMkfs = time.Since(start)
	start = time.Now()
	if err := command(ctx, "", "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow); err != nil {
		return err
	}
	r.stdQcow2 = time.Since(start)
	r.stdBuildCPU = cpuTime() - cpu

	typ, err := fileType(ctx, raw, b.check)
	if err != nil {
		return fmt.Errorf("the standard tools' disk: %w", err)
	}
	fi, err := os.Stat(qcow)
	if err != nil {
		return err
	}
	tree, err := treeBytes(root)
	if err != nil {
		return err
	}
	b.stdOut = produced{packages: len(b.pkgs), treeBytes: tree, qcow2: fi.Size(), checked: typ}
	return nil
}

// parseSimulate reads NAME=VERSION from the Inst lines of apt-get
// --simulate.
func parseSimulate(out []byte) []string {
	var set []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Inst ")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(rest, " ")
		version, _, _ := strings.Cut(strings.TrimPrefix(rest, "("), " ")
		set = append(set, name+"="+version)
	}
	sort.Strings(set)
	return set
}

// compare records how apt's resolution differs from sbx's.
func (b *bench) compare(apt []string) {
	sbx := make([]string, len(b.pkgs))
	for i, p := range b.pkgs {
		sbx[i] = p.name + "=" + p.version
	}
	sort.Strings(sbx)
	b.aptOnly, b.sbxOnly = nil, nil
	for _, s := range apt {
		if _, ok := slices.BinarySearch(sbx, s); !ok {
			b.aptOnly = append(b.aptOnly, s)
		}
	}
	for _, s := range sbx {
		if _, ok := slices.BinarySearch(apt, s); !ok {
			b.sbxOnly = append(b.sbxOnly, s)
		}
	}
}

// fileType is debugfs's "Type:" of path in the ext4 image raw; an error
// when it is absent.
func fileType(ctx context.Context, raw, path string) (string, error) {
	out, err := exec.CommandContext(ctx, "debugfs", "-R", "stat "+path, raw).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("debugfs stat %s: %w\n%s", path, err, out)
	}
	for _, f := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(f, "Type: "); ok {
			typ, _, _ := strings.Cut(rest, " ")
			return typ, nil
		}
	}
	return "", fmt.Errorf("%s is not in the disk: %s", path, strings.TrimSpace(string(out)))
}

// command runs a tool in dir, its output kept for the error.
func command(ctx context.Context, dir, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := out.String()
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, msg)
	}
	return nil
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

func linkOrCopy(src, dst string) error {
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

// treeBytes is the content size of the regular files under root.
func treeBytes(root string) (int64, error) {
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// stats are the median, best and worst of ds.
func stats(ds []time.Duration) (median, best, worst float64) {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return m.Seconds(), s[0].Seconds(), s[n-1].Seconds()
}

func (b *bench) column(f func(round) time.Duration) []time.Duration {
	out := make([]time.Duration, len(b.results))
	for i, r := range b.results {
		out[i] = f(r)
	}
	return out
}

func (b *bench) table(w io.Writer) {
	fmt.Fprintf(w, "Image: packages = %q in an empty root, %d packages pinned (%d MB of .debs), size %s; %d rounds.\n\n",
		b.packages, len(b.pkgs), b.debBytes/1e6, b.size, len(b.results))
	fmt.Fprintln(w, "| step | sbx median | sbx best | sbx worst | standard median | standard best | standard worst | sbx / standard (median) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	row := func(label string, sbx, std func(round) time.Duration) {
		sm, sb, sw := stats(b.column(sbx))
		tm, tb, tw := stats(b.column(std))
		fmt.Fprintf(w, "| %s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f s | %.2f× |\n", label, sm, sb, sw, tm, tb, tw, sm/tm)
	}
	row("resolve", func(r round) time.Duration { return r.sbxResolve }, func(r round) time.Duration { return r.stdResolve })
	row("build", func(r round) time.Duration { return r.sbxBuild }, round.stdBuild)
	row("total", func(r round) time.Duration { return r.sbxResolve + r.sbxBuild }, func(r round) time.Duration { return r.stdResolve + r.stdBuild() })
	row("resolve, CPU", func(r round) time.Duration { return r.sbxResolveCPU }, func(r round) time.Duration { return r.stdResolveCPU })
	row("build, CPU", func(r round) time.Duration { return r.sbxBuildCPU }, func(r round) time.Duration { return r.stdBuildCPU })
	row("total, CPU", func(r round) time.Duration { return r.sbxResolveCPU + r.sbxBuildCPU }, func(r round) time.Duration { return r.stdResolveCPU + r.stdBuildCPU })
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| standard build step | median | best | worst |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, s := range []struct {
		label string
		f     func(round) time.Duration
	}{
		{"`apt-get download` (files present)", func(r round) time.Duration { return r.stdDownload }},
		{"`dpkg-deb -x` of each", func(r round) time.Duration { return r.stdExtract }},
		{"`mke2fs -t ext4 -d`", func(r round) time.Duration { return r.stdMkfs }},
		{"`qemu-img convert -O qcow2`", func(r round) time.Duration { return r.stdQcow2 }},
	} {
		m, lo, hi := stats(b.column(s.f))
		fmt.Fprintf(w, "| %s | %.2f s | %.2f s | %.2f s |\n", s.label, m, lo, hi)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Produced: sbx %d packages installed, qcow2 %d MB, %s is a %s file; standard %d packages extracted (%d MB of files), qcow2 %d MB, %s is a %s file.\n",
		b.sbxOut.packages, b.sbxOut.qcow2/1e6, b.check, b.sbxOut.checked,
		b.stdOut.packages, b.stdOut.treeBytes/1e6, b.stdOut.qcow2/1e6, b.check, b.stdOut.checked)
	if len(b.aptOnly)+len(b.sbxOnly) == 0 {
		fmt.Fprintln(w, "apt-get's resolution is the same set of NAME=VERSION as sbx's lock.")
	} else {
		fmt.Fprintf(w, "apt-get's resolution differs from sbx's lock: only apt %v; only sbx %v.\n", b.aptOnly, b.sbxOnly)
	}
}

// cpuTime is the user and system time of this process and of its
// children waited for so far.
func cpuTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

func inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode number", path)
	}
	return st.Ino, nil
}
