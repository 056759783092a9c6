package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/aptkernel"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/build/rootfs"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/lang"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "tree":
			return report(stderr, "tree", writeTree(args[1:]))
		case "disk":
			return report(stderr, "disk", writeDisk(args[1:]))
		}
	}
	flags := flag.NewFlagSet("imagebench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	work := flags.String("work", "", "work directory (created; about 4 GB are written to it)")
	codex := flags.String("codex", "0.171.0", "Codex CLI version on npm")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *work == "" || flags.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: go run ./bench/imagebench -work DIR [-codex VERSION]")
		return 2
	}
	b := &bench{work: *work, codex: *codex, log: stderr}
	if err := b.run(); err != nil {
		fmt.Fprintf(stderr, "imagebench: %v\n", err)
		return 1
	}
	b.table(stdout)
	return 0
}

func report(stderr io.Writer, what string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "imagebench %s: %v\n", what, err)
		return 1
	}
	return 0
}

// Packages are the Debian packages of the image's base, at the
// candidate versions of the host's apt.
var Packages = []string{
	"busybox-static", "ca-certificates", "libc6", "coreutils", "bash",
	"git", "git-man", "perl-base", "perl-modules-5.36", "libperl5.36",
	"python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib",
	"tzdata", "vim-runtime", "libssl3", "libicu72", "gcc-12", "cpp-12",
	"libgcc-12-dev", "binutils-x86-64-linux-gnu",
}

// ImageSize is the root filesystem size both builders are given.
const ImageSize = 2 << 30

// result is one measured child process.
type result struct {
	name    string
	wall    time.Duration
	maxRSS  int64 // KiB
	command string
}

type bench struct {
	work, codex string
	log         io.Writer
	results     map[string]result
	files       int
	bytes       int64
}

func (b *bench) path(elem ...string) string {
	return filepath.Join(append([]string{b.work}, elem...)...)
}

func (b *bench) run() error {
	b.results = map[string]result{}
	if err := os.MkdirAll(b.work, 0o755); err != nil {
		return err
	}
	if err := b.tools(); err != nil {
		return err
	}
	spec := b.path("spec")
	if err := b.writeSpec(spec, aptVersions{}); err != nil {
		return err
	}
	sbx := b.path("bin", "sbx")
	env := append(os.Environ(), cache.EnvRoot+"="+b.path("cache"), "SOURCE_DATE_EPOCH=0")
	if err := os.RemoveAll(b.path("cache")); err != nil {
		return err
	}
	if _, err := b.measure("lock", env, sbx, "lock", spec); err != nil {
		return err
	}
	steps := []struct {
		name string
		args []string
	}{
		{"sbx-cold", []string{"build", spec}},
		{"sbx-scratch", []string{"build", "-verify", spec}},
		{"sbx-change", []string{"build", "-var", "motd=changed", spec}},
		{"sbx-warm", []string{"build", "-var", "motd=changed", spec}},
	}
	for _, s := range steps {
		if _, err := b.measure(s.name, env, sbx, s.args...); err != nil {
			return err
		}
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	tarPath := b.path("tree.tar")
	// The tree is the last build's: the lock holds that configuration's
	// input hash.
	treeEnv := append(append([]string(nil), env...), "SBX_VAR_motd=changed")
	if _, err := b.measure("tree", treeEnv, self, "tree", spec, tarPath); err != nil {
		return err
	}
	if err := b.countTree(tarPath); err != nil {
		return err
	}
	size := fmt.Sprint(ImageSize)
	if _, err := b.measure("sbx-disk", env, self, "disk", size, tarPath, b.path("sbx.qcow2")); err != nil {
		return err
	}
	root := b.path("root")
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	if _, err := b.measure("extract", env, "tar", "-xpf", tarPath, "--numeric-owner", "--xattrs", "-C", root); err != nil {
		return err
	}
	raw := b.path("baseline.ext4")
	os.Remove(raw)
	if _, err := b.measure("mke2fs", env, "mke2fs", "-q", "-F", "-t", "ext4", "-d", root, "-E", "root_owner=0:0", "-L", image.DiskLabel, raw, fmt.Sprintf("%dk", ImageSize>>10)); err != nil {
		return err
	}
	if _, err := b.measure("qemu-img", env, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, b.path("baseline.qcow2")); err != nil {
		return err
	}
	return nil
}

// tools builds sbx and the guest agent into work/bin.
func (b *bench) tools() error {
	bin := b.path("bin")
	builds := [][]string{
		{"go", "build", "-o", filepath.Join(bin, "sbx"), "./cmd/sbx"},
		{"go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", filepath.Join(bin, "sbx-guest-linux-amd64"), "./cmd/sbx-guest"},
	}
	for _, args := range builds {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOAMD64=v1")
		cmd.Stdout, cmd.Stderr = b.log, b.log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

// versions says which package versions the spec pins.
type versions interface {
	// Candidate is the version of pkg to pin.
	Candidate(pkg string) (string, error)
	// Kernel is the versioned kernel package and its version.
	Kernel() (pkg, version string, err error)
}

// aptVersions are the host's apt candidates.
type aptVersions struct{}

func (aptVersions) Candidate(pkg string) (string, error)     { return candidate(pkg) }
func (aptVersions) Kernel() (pkg, version string, err error) { return aptkernel.Package() }

// writeSpec writes the benchmark's spec into dir, with the packages at
// the versions vs gives.
func (b *bench) writeSpec(dir string, vs versions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kpkg, kver, err := vs.Kernel()
	if err != nil {
		return err
	}
	var s strings.Builder
	fmt.Fprintf(&s, "variable \"motd\" {\n  default = \"sbx benchmark\"\n}\n\n")
	fmt.Fprintf(&s, "image \"bench\" {\n  platform = \"linux/amd64\"\n  size     = \"%dGiB\"\n\n", ImageSize>>30)
	fmt.Fprintf(&s, "  kernel {\n    source = \"deb:%s=%s\"\n    file   = \"boot/vmlinuz-*\"\n  }\n\n", kpkg, kver)
	for _, p := range Packages {
		v, err := vs.Candidate(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&s, "  artifact %q {\n    source  = \"deb:%s=%s\"\n    dest    = \"/\"\n    extract = true\n  }\n\n",
			strings.NewReplacer(".", "_", "-", "_").Replace(p), p, v)
	}
	fmt.Fprintf(&s, "  artifact \"codex\" {\n    source = \"npm:@openai/codex@%s-linux-x64\"\n", b.codex)
	fmt.Fprintf(&s, "    file   = \"package/vendor/x86_64-unknown-linux-musl/bin/codex\"\n    dest   = \"/usr/local/bin/codex\"\n    mode   = \"0755\"\n  }\n\n")
	fmt.Fprintf(&s, "  file \"/etc/motd\" {\n    content = var.motd\n  }\n\n  user \"dev\" {\n    uid = 1000\n  }\n}\n")
	return os.WriteFile(filepath.Join(dir, "bench.hcl"), []byte(s.String()), 0o644)
}

// candidate is the version apt would install of pkg.
func candidate(pkg string) (string, error) {
	out, err := exec.Command("apt-cache", "policy", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache policy %s: %w", pkg, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			if v = strings.TrimSpace(v); v != "" && v != "(none)" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("apt has no candidate version of %s", pkg)
}

// measure runs a child process and records its wall time and peak
// resident memory under name.
func (b *bench) measure(name string, env []string, prog string, args ...string) (result, error) {
	cmd := exec.Command(prog, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, b.log
	fmt.Fprintf(b.log, "imagebench: %s: %s %s\n", name, filepath.Base(prog), strings.Join(args, " "))
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%s: %s: %w", name, prog, err)
	}
	r := result{name: name, wall: wall, command: filepath.Base(prog) + " " + strings.Join(args, " ")}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss
	}
	fmt.Fprintf(b.log, "imagebench: %s: %v, peak RSS %d MiB\n", name, wall.Round(10*time.Millisecond), r.maxRSS>>10)
	b.results[name] = r
	return r, nil
}

// countTree counts the tree's entries and content bytes.
func (b *bench) countTree(path string) error {
	out, err := exec.Command("tar", "-tvf", path).Output()
	if err != nil {
		return fmt.Errorf("tar -tvf %s: %w", path, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		b.files++
		var n int64
		fmt.Sscan(f[2], &n)
		b.bytes += n
	}
	return nil
}

func (b *bench) table(w io.Writer) {
	r := b.results
	base := result{wall: r["mke2fs"].wall + r["qemu-img"].wall, maxRSS: max(r["mke2fs"].maxRSS, r["qemu-img"].maxRSS)}
	fmt.Fprintf(w, "Input: %d paths, %d MB of file content; image size %d GiB.\n\n", b.files, b.bytes/1e6, ImageSize>>30)
	fmt.Fprintln(w, "| build | time | peak RSS | time / baseline | memory / baseline |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	row := func(label string, x result) {
		fmt.Fprintf(w, "| %s | %.2f s | %d MiB | %.2f× | %.2f× |\n", label, x.wall.Seconds(), x.maxRSS>>10,
			x.wall.Seconds()/base.wall.Seconds(), float64(x.maxRSS)/float64(base.maxRSS))
	}
	row("baseline: `mke2fs -t ext4 -d` + `qemu-img convert -O qcow2`", base)
	fmt.Fprintf(w, "| … of which `mke2fs -d` | %.2f s | %d MiB | | |\n", r["mke2fs"].wall.Seconds(), r["mke2fs"].maxRSS>>10)
	fmt.Fprintf(w, "| … of which `qemu-img convert` | %.2f s | %d MiB | | |\n", r["qemu-img"].wall.Seconds(), r["qemu-img"].maxRSS>>10)
	row("sbx: canonical tar → ext4 → qcow2 (same tree)", r["sbx-disk"])
	row("`sbx build`, empty cache (downloads included)", r["sbx-cold"])
	row("`sbx build -verify` (from scratch, inputs cached)", r["sbx-scratch"])
	row("`sbx build` after changing one file (kernel cached)", r["sbx-change"])
	row("`sbx build`, nothing changed (cache hit)", r["sbx-warm"])
	fmt.Fprintf(w, "\nNot in the comparison: assembling the tree and writing its tar took %.2f s (%d MiB); extracting it for the baseline took %.2f s.\n",
		r["tree"].wall.Seconds(), r["tree"].maxRSS>>10, r["extract"].wall.Seconds())
}

// writeTree is the tree subcommand: SPECDIR OUT.tar. It assembles the
// root filesystem of the spec's one image from inputs already in the
// cache and writes its canonical tar.
func writeTree(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: imagebench tree SPECDIR OUT.tar")
	}
	dir, out := args[0], args[1]
	cfg, diags := lang.Load(dir, lang.Options{Environ: os.Environ()})
	if diags.HasErrors() {
		return diags
	}
	ctx, env := context.Background(), pipeline.Env{}
	l, diags := pipeline.Lock(ctx, cfg, env, pipeline.LockOptions{IfStale: true, ReadOnly: true})
	if diags.HasErrors() {
		return diags
	}
	if len(cfg.Images) != 1 || l.Lock == nil {
		return fmt.Errorf("%s: want one image and an up-to-date lock file", dir)
	}
	opts, err := pipeline.ImageOptions(dir, env)
	if err != nil {
		return err
	}
	for name, img := range cfg.Images {
		li := l.Lock.Lookup(name)
		fetched, err := fetch.Inputs(ctx, img, li, opts.Cache, opts.Fetch)
		if err != nil {
			return err
		}
		tree, err := rootfs.Assemble(ctx, img, rootfs.Inputs(fetched), rootfs.Options{InputHash: li.InputHash, TempDir: filepath.Dir(out)})
		if err != nil {
			return err
		}
		defer tree.Close()
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		if err := tree.WriteTar(w, 0); err != nil {
			f.Close()
			return err
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

// writeDisk is the disk subcommand: SIZE IN.tar OUT.qcow2. It is sbx's
// disk path, as image.Build takes it: the canonical tar into ext4 (with
// the journal size Build gives), then into qcow2.
func writeDisk(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: imagebench disk SIZE IN.tar OUT.qcow2")
	}
	var size int64
	if _, err := fmt.Sscan(args[0], &size); err != nil {
		return fmt.Errorf("size %q: %w", args[0], err)
	}
	in, out := args[1], args[2]
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	raw := out + ".ext4"
	dst, err := os.Create(raw)
	if err != nil {
		return err
	}
	defer os.Remove(raw)
	_, err = ext4.Build(context.Background(), dst, bufio.NewReaderSize(src, 1<<20), ext4.Options{
		Size: size, Label: image.DiskLabel, Seed: []byte(in), JournalBlocks: image.JournalBlocks(size),
	})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return qcow2.ConvertFile(context.Background(), out, raw, qcow2.Options{})
}
