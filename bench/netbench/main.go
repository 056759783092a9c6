package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/policy"
)

// The name the sandbox's guest downloads from, mapped by the policy's
// hosts to the host's server, and the addresses of QEMU's user-mode
// network (its defaults: the guest 10.0.2.15, the host 10.0.2.2, its
// resolver 10.0.2.3).
const (
	benchHost   = "bench.test"
	userAddr    = "10.0.2.15/24"
	userGateway = "10.0.2.2"
	userDNS     = "10.0.2.3"
	// Each guest's memory; both have one vCPU.
	machineMemory = 512 << 20
)

// Timeouts of every wait.
const (
	setupTimeout = 15 * time.Minute // the fixture and its image
	startLimit   = 5 * time.Minute  // one machine to boot and be configured
	stopLimit    = time.Minute      // one machine to stop
	execLimit    = 30 * time.Second // one exec of true
	// A download may take its size at minFloor, plus a minute; a burst
	// of small requests perRequest each, plus a minute.
	minFloor   = 1 << 20 // bytes per second
	perRequest = 2 * time.Second
	// Exec round trips of true timed on each path.
	execSamples = 5
	// The warm-up round's download is at most this long.
	warmSize = 64 << 20
	// The warm-up round's burst has at most this many requests.
	warmRequests = 20
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("netbench", flag.ContinueOnError)
	flags.SetOutput(stderr)
	sizeArg := flags.String("size", "1GiB", "bytes each download fetches (a number, or with a KiB, MiB or GiB suffix)")
	rounds := flags.Int("n", 3, "rounds, each one download and one burst of small requests on each network, alternated, after one warm-up round")
	requests := flags.Int("requests", 200, "sequential 1 KiB requests in each burst")
	work := flags.String("work", "", "work directory, kept afterwards (default: a temporary directory, removed)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	size, err := parseSize(*sizeArg)
	if err != nil || *rounds < 1 || *requests < 1 || flags.NArg() > 0 {
		if err != nil {
			fmt.Fprintln(stderr, "netbench:", err)
		}
		fmt.Fprintln(stderr, "usage: go run ./bench/netbench [-size 1GiB] [-n 3] [-requests 200] [-work DIR]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bench{size: size, rounds: *rounds, requests: *requests, log: vmbench.Log{W: stderr, Name: "netbench"}}
	img, cleanupWork, err := b.setup(ctx, *work)
	res := &results{}
	if err == nil {
		err = b.measure(ctx, img, res)
	}
	cleanErr := b.cleanup()
	cleanupWork()
	res.print(stdout)
	return vmbench.Exit(ctx, "netbench", stderr, err, cleanErr)
}

// bench is one run of the benchmark and what it started.
type bench struct {
	size     int64
	rounds   int
	requests int
	log      vmbench.Log

	base  string // short: the machines' directories and the audit log
	srv   *server
	paths []*netPath // the sandbox network's, then the user-mode network's
}

// netPath is one guest and how it reaches the host's server.
type netPath struct {
	name string
	m    *machine.Machine
	sb   *sandbox.Sandbox // the sandbox m is the machine of; nil for the user-mode network's
	url  string           // the server's root as the guest names it
	res  *pathResult
}

// setup makes the fixture and its image in work; the function it returns
// removes a temporary work directory.
func (b *bench) setup(ctx context.Context, work string) (*image.Result, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	fix, remove, err := vmbench.Setup(ctx, b.log, work, "making the test sandbox's image in %s (guest agent, kernel and busybox packages)")
	if err != nil {
		return nil, remove, err
	}
	_, img, err := fix.Build(ctx)
	return img, remove, err
}

// measure boots a guest on each network and runs the rounds.
func (b *bench) measure(ctx context.Context, img *image.Result, res *results) error {
	res.size, res.requests, res.hostCPUs = b.size, b.requests, runtime.NumCPU()
	host, err := qemu.Probe(ctx)
	if err != nil {
		return err
	}
	res.host, res.qemu = host, host.QEMU["amd64"]
	if b.base, err = os.MkdirTemp("", "sbxn-"); err != nil {
		return err
	}
	if b.srv, err = newServer(); err != nil {
		return err
	}
	b.log.Printf("host server on 127.0.0.1:%d", b.srv.port())

	sandbox, err := b.startSandbox(ctx, img, &host)
	if err != nil {
		return err
	}
	res.paths = append(res.paths, sandbox.res)
	baseline, err := b.startBaseline(ctx, img, &host)
	if err != nil {
		return err
	}
	res.paths = append(res.paths, baseline.res)

	for _, p := range b.paths {
		for range execSamples {
			d, err := b.execTrue(ctx, p)
			if err != nil {
				return err
			}
			p.res.execTrue = append(p.res.execTrue, d)
		}
	}
	for round := 0; round <= b.rounds; round++ {
		what := fmt.Sprintf("round %d of %d", round, b.rounds)
		size, requests := b.size, b.requests
		if round == 0 {
			what = "warm-up (not counted)"
			size, requests = min(size, warmSize), min(requests, warmRequests)
		}
		// Alternate which network goes first.
		order := b.paths
		if round%2 == 0 {
			order = []*netPath{b.paths[1], b.paths[0]}
		}
		for _, p := range order {
			d, err := b.download(ctx, p, size)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", p.name, what, err)
			}
			b.log.Printf("%s, %s: %s in %s, %s", p.name, what, vmbench.Size(size), vmbench.Seconds(d), rate(size, d))
			if round > 0 {
				p.res.downloads = append(p.res.downloads, d)
			}
		}
		for _, p := range order {
			d, err := b.burst(ctx, p, requests)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", p.name, what, err)
			}
			b.log.Printf("%s, %s: %d requests in %s, %.1f requests/s", p.name, what, requests, vmbench.Seconds(d), vmbench.PerSecond(requests, d))
			if round > 0 {
				p.res.bursts = append(p.res.bursts, d)
			}
		}
	}
	return nil
}

// startSandbox boots a guest whose network is the sandbox network, with
// a policy that allows benchHost and maps it to the host's server.
func (b *bench) startSandbox(ctx context.Context, img *image.Result, host *qemu.Host) (*netPath, error) {
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	auth, err := ca.New()
	if err != nil {
		return nil, err
	}
	pol := policy.Sandbox{
		Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern(benchHost)}},
		Hosts: []policy.HostMapping{{Name: benchHost, Addr: fmt.Sprintf("127.0.0.1:%d", b.srv.port())}},
	}
	audit := filepath.Join(b.base, "audit")
	if err := os.Mkdir(audit, 0o700); err != nil {
		return nil, err
	}
	b.log.Printf("booting the guest on the sandbox network")
	// The audit log is written as a supervisor writes it: it is part of
	// what each connection costs.
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.Start(ctx,
		sandbox.Spec{Name: "netbench-sandbox", Image: si, CPUs: 1, Memory: machineMemory, Policy: pol},
		sandbox.Options{Hypervisor: qemu.New(host), Dir: b.base, AuditDir: audit, CA: auth})
	if err != nil {
		return nil, err
	}
	p := &netPath{name: "sandbox network", m: sb.Machine(), sb: sb, url: "http://" + benchHost, res: &pathResult{name: "sandbox network"}}
	b.paths = append(b.paths, p)
	return p, nil
}

// startBaseline boots a guest on QEMU's user-mode network, where the
// host's loopback is 10.0.2.2.
func (b *bench) startBaseline(ctx context.Context, img *image.Result, host *qemu.Host) (*netPath, error) {
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	b.log.Printf("booting the guest on QEMU's user-mode network")
	boot, err := pipeline.BootFiles(img)
	if err != nil {
		return nil, err
	}
	m, err := machine.Start(ctx, machine.Options{Name: "netbench-user", Boot: boot, Hypervisor: qemu.New(host), Dir: b.base, CPUs: 1, Memory: machineMemory, Bench: machine.Bench{UserNetwork: true}})
	if err != nil {
		return nil, err
	}
	p := &netPath{name: "QEMU user-mode network", m: m, url: fmt.Sprintf("http://%s:%d", userGateway, b.srv.port()), res: &pathResult{name: "QEMU user-mode network"}}
	b.paths = append(b.paths, p)
	err = m.Client().Configure(ctx, agentproto.Configure{Net: &agentproto.NetConfig{
		Interface: sandboxnet.GuestInterface, Addr: userAddr, Gateway: userGateway, DNS: userDNS,
	}})
	if err != nil {
		return nil, fmt.Errorf("configuring the user-mode network's guest: %w", err)
	}
	return p, nil
}

// exec runs args in p's guest within limit and returns how long the exec
// took as the host saw it. A command that fails is an error quoting its
// output.
func (b *bench) exec(ctx context.Context, p *netPath, limit time.Duration, args ...string) (time.Duration, error) {
	_, d, err := vmbench.Exec(ctx, p.m, limit, guestconn.Cmd{Args: args})
	return d, err
}

func (b *bench) execTrue(ctx context.Context, p *netPath) (time.Duration, error) {
	return b.exec(ctx, p, execLimit, "true")
}

// download fetches size bytes with busybox wget into /dev/null, and
// checks that the server wrote one whole body of that size meanwhile.
func (b *bench) download(ctx context.Context, p *netPath, size int64) (time.Duration, error) {
	limit := time.Duration(size/minFloor)*time.Second + time.Minute
	before, beforeBytes := b.srv.counts()
	d, err := b.exec(ctx, p, limit, "wget", "-q", "-O", "/dev/null", p.url+zeroPath+"?n="+strconv.FormatInt(size, 10))
	if err != nil {
		return 0, err
	}
	after, afterBytes := b.srv.counts()
	if after-before != 1 || afterBytes-beforeBytes != size {
		return 0, fmt.Errorf("the server wrote %d whole bodies and %d bytes during the download; want 1 and %d", after-before, afterBytes-beforeBytes, size)
	}
	return d, nil
}

// burstScript runs wget on $2 $1 times, one after another, each its own
// connection (busybox wget keeps none alive), and stops at the first
// failure.
const burstScript = `i=0; while [ "$i" -lt "$1" ]; do wget -q -O /dev/null "$2" || exit 1; i=$((i+1)); done`

// burst makes n sequential requests for the small file in one guest
// shell loop, and checks that the server answered every one whole.
func (b *bench) burst(ctx context.Context, p *netPath, n int) (time.Duration, error) {
	limit := time.Duration(n)*perRequest + time.Minute
	before, _ := b.srv.counts()
	d, err := b.exec(ctx, p, limit, "sh", "-c", burstScript, "burst", strconv.Itoa(n), p.url+smallPath)
	if err != nil {
		return 0, err
	}
	if after, _ := b.srv.counts(); after-before != n {
		return 0, fmt.Errorf("the server answered %d whole requests during the burst; want %d", after-before, n)
	}
	return d, nil
}

// cleanup stops both machines, the sandbox network and the server, and
// removes the machines' directories.
func (b *bench) cleanup() error {
	var errs []error
	for _, p := range b.paths {
		ctx, cancel := context.WithTimeout(context.Background(), stopLimit)
		stop := p.m.Stop
		if p.sb != nil {
			stop = p.sb.Stop
		}
		if err := stop(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if b.srv != nil {
		if err := b.srv.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.base != "" {
		if err := os.RemoveAll(b.base); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
