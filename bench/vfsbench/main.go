package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/proto/vfsproto"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/policy"
)

// Where the guest finds each target.
const (
	sbxMount    = "/mnt/sbx"
	fsMount     = "/mnt/sbxfs"
	virtfsMount = "/mnt/virtfs"
	diskDir     = "/var/tmp/vfsbench"
)

// Timeouts of every wait.
const (
	setupTimeout = 20 * time.Minute // the fixture and its image
	startLimit   = 5 * time.Minute  // the machine to boot and be configured
	stopLimit    = time.Minute      // the machine to stop
	// One command may take its bytes at minFloor, or its files at
	// perFile each, plus a minute.
	minFloor = 256 << 10 // bytes per second
	perFile  = 250 * time.Millisecond
	// The machine's memory: the page cache must not hold the whole
	// sequential file for long, and is dropped before each read anyway.
	machineMemory = 512 << 20
)

// benchSpec is the image: Debian's git over the Debian kernel (with
// Debian's Essential and required packages: dd, stat, cp, mount), and
// the module of 9p's virtio transport, which only QEMU's export uses.
const benchSpec = `image "box" {
  platform = "linux/amd64"
  size     = "2GiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
    # QEMU's export's transport.
    modules = ["9pnet_virtio"]
  }

  packages    = ["git"]
  executables = ["git"]

  user "agent" {
    uid = 1000
  }
}

sandbox "box" {
  image  = image.box
  user   = "agent"
  cpus   = 1
  memory = "512MiB"
}
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("vfsbench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	sizeArg := flags.String("size", "256MiB", "bytes of each sequential write and read (a whole number of MiB, with a MiB or GiB suffix)")
	files := flags.Int("files", 2000, "small files each create, stat and unlink pass makes")
	gitFiles := flags.Int("gitfiles", 10000, "files of the git tree whose status is timed")
	rounds := flags.Int("n", 3, "rounds, each every measurement on every target, alternated, after one warm-up round")
	work := flags.String("work", "", "work directory, kept afterwards (default: a temporary directory, removed)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	size, err := parseSize(*sizeArg)
	if err != nil || *rounds < 1 || *files < 1 || *gitFiles < 1 || flags.NArg() > 0 {
		if err != nil {
			fmt.Fprintln(stderr, "vfsbench:", err)
		}
		fmt.Fprintln(stderr, "usage: go run ./bench/vfsbench [-size 256MiB] [-files 2000] [-gitfiles 10000] [-n 3] [-work DIR]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bench{size: size, files: *files, gitFiles: *gitFiles, rounds: *rounds, log: vmbench.Log{W: stderr, Name: "vfsbench"}}
	img, cleanupWork, err := b.setup(ctx, *work)
	res := &results{}
	if err == nil {
		err = b.measure(ctx, img, res)
	}
	cleanErr := b.cleanup()
	cleanupWork()
	res.print(stdout)
	return vmbench.Exit(ctx, "vfsbench", stderr, err, cleanErr)
}

// bench is one run of the benchmark and what it started.
type bench struct {
	size     int64
	files    int
	gitFiles int
	rounds   int
	log      vmbench.Log

	base string // short: the machine's directory and the host tree
	tree string // the host tree both 9p servers export
	sb   *sandbox.Sandbox
}

// target is one file system the guest measures.
type target struct {
	name string
	dir  string // the guest directory the measurements write in
	repo string // the guest path of the git tree
	res  *targetResult
}

// setup makes the fixture's kernel and agent in work and builds an image
// with Debian's git; the function it returns removes a temporary work
// directory.
func (b *bench) setup(ctx context.Context, work string) (*image.Result, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	fix, remove, err := vmbench.Setup(ctx, b.log, work, "making an image with Debian's git in %s")
	if err != nil {
		return nil, remove, err
	}
	if err := os.WriteFile(filepath.Join(fix.Dir, "sbx.hcl"), []byte(benchSpec), 0o644); err != nil {
		return nil, remove, err
	}
	_, img, err := fix.Build(ctx)
	return img, remove, err
}

// makeTree makes the host tree: a git repository of b.gitFiles files in
// directories of 100, committed, with an .env and a key the mount hides
// as a workspace would.
func (b *bench) makeTree(ctx context.Context) error {
	repo := filepath.Join(b.tree, "repo")
	for i := range b.gitFiles {
		d := filepath.Join(repo, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.txt", i%100)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			return err
		}
	}
	for name, content := range map[string]string{".env": "TOKEN=x\n", "key.pem": "key\n"} {
		if err := os.WriteFile(filepath.Join(b.tree, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"init", "-q", "-b", "main"},
		// Inode numbers and ctimes differ between the three targets'
		// views of one tree; git compares sizes and mtimes only, so no
		// target's run rewrites the index for the next.
		{"config", "core.checkStat", "minimal"}, {"config", "core.trustctime", "false"},
		{"add", "."}, {"commit", "-q", "-m", "tree"}} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = repo
		cmd.Env = []string{"HOME=" + b.base, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@test.invalid", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@test.invalid"}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("host git %v: %v: %s", args, err, out)
		}
	}
	return nil
}

// measure boots the guest, prepares the three targets and runs the
// rounds.
func (b *bench) measure(ctx context.Context, img *image.Result, res *results) error {
	res.size, res.files, res.gitFiles, res.hostCPUs = b.size, b.files, b.gitFiles, runtime.NumCPU()
	host, err := qemu.Probe(ctx)
	if err != nil {
		return err
	}
	res.host, res.qemu = host, host.QEMU["amd64"]
	if b.base, err = os.MkdirTemp("", "sbxv-"); err != nil {
		return err
	}
	b.tree = filepath.Join(b.base, "tree")
	if err := os.Mkdir(b.tree, 0o755); err != nil {
		return err
	}
	b.log.Printf("making a git tree of %d files on the host", b.gitFiles)
	if err := b.makeTree(ctx); err != nil {
		return err
	}
	auth, err := ca.New()
	if err != nil {
		return err
	}
	b.log.Printf("booting the guest")
	startCtx, cancel := context.WithTimeout(ctx, startLimit)
	// The sandbox's mount has the rules a workspace has, so that their
	// cost is in the figures; its owner is root, as QEMU's export shows
	// the host's owner (root here) and the guest measures as root.
	mount := policy.Mount{Guest: sbxMount, Host: b.tree, Access: policy.ReadWrite,
		Hide: []string{".env", "**/*.pem"}, Owner: "root"}
	// The same tree and rules again, served by a virtio-fs device.
	fsm := mount
	fsm.Guest = fsMount
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		cancel()
		return err
	}
	b.sb, err = sandbox.Start(startCtx,
		sandbox.Spec{Name: "vfsbench", Image: si, CPUs: 1, Memory: machineMemory,
			Policy: policy.Sandbox{Mounts: []policy.Mount{mount, fsm}},
			Mounts: []sandboxfs.Mount{{Policy: mount, HostDir: b.tree, Transport: sandboxfs.Transport9P}, {Policy: fsm, HostDir: b.tree, Transport: sandboxfs.TransportVirtioFS}}},
		sandbox.Options{Hypervisor: qemu.New(&host), Dir: b.base, CA: auth, Bench: machine.Bench{VirtFS: b.tree}})
	cancel()
	if err != nil {
		return err
	}
	// QEMU's export is mounted as the sandbox's is: the same msize and
	// cache mode. Each column's transport is checked in /proc/mounts, so
	// that a changed default cannot measure one transport twice.
	prep := fmt.Sprintf(`set -e
mkdir -p %[1]s %[3]s
mount -t 9p -o trans=virtio,version=9p2000.L,msize=%[4]d,cache=%[5]s %[2]s %[1]s
test -f %[1]s/repo/d000/f000.txt
grep -q ' %[6]s 9p ' /proc/mounts || { echo '%[6]s is not served over 9P' >&2; exit 1; }
grep -q ' %[7]s virtiofs ' /proc/mounts || { echo '%[7]s is not served over virtio-fs' >&2; exit 1; }
test ! -e %[6]s/.env
git config --global safe.directory '*'
cp -a %[1]s/repo %[3]s/repo
test -f %[7]s/repo/d000/f000.txt
test ! -e %[7]s/.env
mkdir -p %[6]s/w-sbx %[7]s/w-sbxfs %[1]s/w-virtfs %[3]s/w-disk
`, virtfsMount, qemu.VirtFSTag, diskDir, vfsproto.MaxMsize, vfsproto.CacheMmap, sbxMount, fsMount)
	b.log.Printf("mounting QEMU's export and copying the git tree to the guest's disk")
	if _, err := b.sh(ctx, time.Duration(b.gitFiles)*perFile+5*time.Minute, prep); err != nil {
		return err
	}
	targets := []*target{
		{name: "sbx 9P", dir: sbxMount + "/w-sbx", repo: sbxMount + "/repo"},
		{name: "sbx virtio-fs", dir: fsMount + "/w-sbxfs", repo: fsMount + "/repo"},
		{name: "guest disk", dir: diskDir + "/w-disk", repo: diskDir + "/repo"},
		{name: "QEMU -virtfs", dir: virtfsMount + "/w-virtfs", repo: virtfsMount + "/repo"},
	}
	for _, t := range targets {
		t.res = &targetResult{name: t.name}
		res.targets = append(res.targets, t.res)
	}
	for round := 0; round <= b.rounds; round++ {
		what := fmt.Sprintf("round %d of %d", round, b.rounds)
		size, files := b.size, b.files
		if round == 0 {
			what = "warm-up (not counted)"
			size, files = min(size, 16<<20), min(files, 100)
		}
		// Rotate which target goes first.
		order := make([]*target, len(targets))
		for i := range targets {
			order[i] = targets[(i+round)%len(targets)]
		}
		for _, t := range order {
			if err := b.measureOne(ctx, t, round > 0, what, size, files); err != nil {
				return fmt.Errorf("%s, %s: %w", t.name, what, err)
			}
		}
	}
	return nil
}

// measureOne times every measurement on t once; keep says whether the
// samples count.
func (b *bench) measureOne(ctx context.Context, t *target, keep bool, what string, size int64, files int) error {
	mib := size >> 20
	byteLimit := time.Duration(size/minFloor)*time.Second + time.Minute
	fileLimit := time.Duration(files)*perFile + time.Minute
	seq := t.dir + "/seq"
	w, err := b.timed(ctx, byteLimit, fmt.Sprintf("dd if=/dev/zero of=%s bs=1M count=%d conv=fsync status=none", seq, mib),
		fmt.Sprintf("test $(stat -c %%s %s) -eq %d", seq, size))
	if err != nil {
		return fmt.Errorf("sequential write: %w", err)
	}
	// The guest's page cache is dropped so that the read reaches the
	// file system.
	if _, err := b.sh(ctx, time.Minute, "sync; echo 3 > /proc/sys/vm/drop_caches"); err != nil {
		return err
	}
	r, err := b.timed(ctx, byteLimit, fmt.Sprintf("test $(dd if=%s bs=1M status=none | wc -c) -eq %d", seq, size), "rm "+seq)
	if err != nil {
		return fmt.Errorf("sequential read: %w", err)
	}
	small := t.dir + "/small"
	c, err := b.timed(ctx, fileLimit, fmt.Sprintf("mkdir %[1]s && cd %[1]s && i=0; while [ $i -lt %[2]d ]; do : > f$i; i=$((i+1)); done", small, files),
		fmt.Sprintf("test $(ls %s | wc -l) -eq %d", small, files))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	s, err := b.timed(ctx, fileLimit, fmt.Sprintf("test $(stat -c %%s %s/* | wc -l) -eq %d", small, files), "")
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	u, err := b.timed(ctx, fileLimit, fmt.Sprintf("rm %s/*", small), "rmdir "+small)
	if err != nil {
		return fmt.Errorf("unlink: %w", err)
	}
	// git status is not warmed up: with core.checkStat minimal no
	// target's first status rewrites the index, and on a slow target one
	// status of the whole tree is minutes.
	var g time.Duration
	if keep {
		g, err = b.timed(ctx, time.Duration(b.gitFiles)*perFile+time.Minute, fmt.Sprintf("test -z \"$(git -C %s status --porcelain)\"", t.repo), "")
		if err != nil {
			return fmt.Errorf("git status: %w", err)
		}
	}
	b.log.Printf("%s, %s: write %s %.1f MB/s, read %.1f MB/s, %d files: create %.0f/s, stat %.0f/s, unlink %.0f/s; git status %s",
		t.name, what, vmbench.Size(size), vmbench.MBps(size, w), vmbench.MBps(size, r), files, vmbench.PerSecond(files, c), vmbench.PerSecond(files, s), vmbench.PerSecond(files, u), vmbench.Seconds(g))
	if keep {
		t.res.writes = append(t.res.writes, w)
		t.res.reads = append(t.res.reads, r)
		t.res.creates = append(t.res.creates, c)
		t.res.stats = append(t.res.stats, s)
		t.res.unlinks = append(t.res.unlinks, u)
		t.res.gitStatus = append(t.res.gitStatus, g)
	}
	return nil
}

// timedScript times its first argument in the guest, between two reads
// of the clock, prints both, then runs its second argument (a check,
// untimed). Timing in the guest leaves the exec's round trip out.
const timedScript = `set -e
t0=$(date +%s.%N)
eval "$1"
t1=$(date +%s.%N)
eval "$2"
echo "$t0 $t1"`

// timed runs cmd as root in the guest within limit and returns how long
// it took there; check runs after, untimed, and its failure is an error.
func (b *bench) timed(ctx context.Context, limit time.Duration, cmd, check string) (time.Duration, error) {
	out, err := b.sh(ctx, limit, timedScript, cmd, check)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) < 2 {
		return 0, fmt.Errorf("%q printed %q, not two times", cmd, out)
	}
	t0, err0 := strconv.ParseFloat(f[len(f)-2], 64)
	t1, err1 := strconv.ParseFloat(f[len(f)-1], 64)
	if err0 != nil || err1 != nil || t1 < t0 {
		return 0, fmt.Errorf("%q printed %q, not two times", cmd, out)
	}
	return max(time.Duration((t1-t0)*float64(time.Second)), time.Microsecond), nil
}

// sh runs script with args as root in the guest within limit and returns
// its standard output; a failure is an error quoting its output.
func (b *bench) sh(ctx context.Context, limit time.Duration, script string, args ...string) (string, error) {
	argv := append([]string{"sh", "-c", script, "vfsbench"}, args...)
	out, _, err := vmbench.Exec(ctx, b.sb.Machine(), limit, guestconn.Cmd{Args: argv, User: "root"})
	return out, err
}

// cleanup stops the machine, closes what the host served it and removes
// its directory and the host tree.
func (b *bench) cleanup() error {
	var errs []error
	if b.sb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), stopLimit)
		errs = append(errs, b.sb.Stop(ctx))
		cancel()
		b.sb = nil
	}
	if b.base != "" {
		errs = append(errs, os.RemoveAll(b.base))
		b.base = ""
	}
	return errors.Join(errs...)
}
