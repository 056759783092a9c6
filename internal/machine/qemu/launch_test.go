//go:build linux

package qemu

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/sbx-dev/sbx/internal/procstat"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/agentbin"
	"github.com/sbx-dev/sbx/internal/build/ext4"
	"github.com/sbx-dev/sbx/internal/build/initramfs"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/build/kernel/kerneltest"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qmp"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/internal/qcow2"
	"github.com/sbx-dev/sbx/platform"
)

// probeHost probes this machine once per test, without touching the
// user's cache.
func probeHost(t *testing.T) Host {
	t.Helper()
	requireQEMU(t)
	h, err := Prober{CacheDir: t.TempDir()}.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// socketDir returns a short temporary directory, so that socket paths stay
// under the 107-byte limit whatever the test's name.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// pausedSpec is a machine with every kind of device Command makes but no
// kernel, its CPUs stopped: QEMU must accept every option, and nothing
// runs.
func pausedSpec(t *testing.T, dir string) VMSpec {
	t.Helper()
	disk := filepath.Join(dir, "root.qcow2")
	if err := qcow2.Create(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	console, _ := listenConsole(t, dir)
	return VMSpec{
		Name:          "paused,test",
		Platform:      platform.Platform{OS: "linux", Architecture: "amd64"},
		CPUs:          2,
		MemoryBytes:   128 << 20,
		RootDisk:      disk,
		ConsoleSocket: console,
		QMPSocket:     filepath.Join(dir, "qmp.sock"),
		AgentSocket:   filepath.Join(dir, "agent.sock"),
		Ports:         map[string]string{"sbx.files": filepath.Join(dir, "files.sock")},
		Paused:        true,
		QEMULog:       filepath.Join(dir, "qemu.log"),
	}
}

// listenNet stands in for the host's network stack: a unix socket QEMU
// connects its network device to. It returns the path and a channel
// receiving the first connection.
func listenNet(t *testing.T, dir string) (string, <-chan net.Conn) {
	t.Helper()
	path := filepath.Join(dir, "net.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	return path, ch
}

// listenConsole stands in for package machine's end of the serial
// console: a unix socket QEMU connects the console to. It returns the
// path and a channel receiving all the console once QEMU closes it.
func listenConsole(t *testing.T, dir string) (string, <-chan []byte) {
	t.Helper()
	path := filepath.Join(dir, "console.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		l.Close()
		if err != nil {
			return
		}
		defer c.Close()
		var out bytes.Buffer
		out.ReadFrom(c)
		ch <- out.Bytes()
	}()
	return path, ch
}

func alive(pid int) bool { return procstat.Alive(pid) }

func TestLaunchPausedQuit(t *testing.T) {
	host := probeHost(t)
	dir := socketDir(t)
	spec := pausedSpec(t, dir)
	netPath, netConn := listenNet(t, dir)
	spec.NetSocket = netPath
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := Launch(ctx, spec, host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	pid := p.Pid()
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("QEMU's process group is %d (%v), want its own, %d", pgid, err, pid)
	}

	var st struct {
		Status  string `json:"status"`
		Running bool   `json:"running"`
	}
	if err := p.QMP.Execute(ctx, "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Status != "prelaunch" {
		t.Errorf("status %+v, want prelaunch", st)
	}
	// The network device connected to the host's stack.
	select {
	case <-netConn:
	case <-time.After(20 * time.Second):
		t.Error("QEMU did not connect to the network socket")
	}
	// The root disk is the qcow2 overlay, on virtio-blk.
	var blocks []struct {
		Device   string `json:"device"`
		Qdev     string `json:"qdev"`
		Inserted struct {
			File string `json:"file"`
			Drv  string `json:"drv"`
		} `json:"inserted"`
	}
	if err := p.QMP.Execute(ctx, "query-block", nil, &blocks); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || blocks[0].Device != "root" || blocks[0].Inserted.Drv != "qcow2" || blocks[0].Inserted.File != spec.RootDisk {
		t.Errorf("block devices: %+v", blocks)
	}
	// The serial ports are there with the names the guest will see.
	for _, name := range []string{AgentPortName, "sbx.files"} {
		portPath(t, ctx, p.QMP, name)
	}
	// QEMU listens on the agent's socket.
	c, err := net.Dial("unix", spec.AgentSocket)
	if err != nil {
		t.Errorf("agent socket: %v", err)
	} else {
		c.Close()
	}
	// No user-mode network or other NIC appeared.
	var nets []json.RawMessage
	if err := p.QMP.Execute(ctx, "query-rx-filter", nil, &nets); err != nil {
		t.Fatal(err)
	}
	if len(nets) != 1 {
		t.Errorf("%d network devices, want the one virtio-net", len(nets))
	}

	if err := p.QMP.Execute(ctx, "quit", nil, nil); err != nil && !errors.Is(err, qmp.ErrClosed) {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("QEMU after quit: %v", err)
	}
	if alive(pid) {
		t.Errorf("QEMU (pid %d) is still running after quit", pid)
	}
	for _, s := range []string{spec.QMPSocket, spec.AgentSocket, spec.Ports["sbx.files"]} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s left behind (%v)", s, err)
		}
	}
	if _, err := os.Lstat(netPath); err != nil {
		t.Errorf("the network stack's own socket was removed: %v", err)
	}
}

// portPath finds the QOM path of the virtio-serial port with the given
// guest-visible name, failing the test when there is none.
func portPath(t *testing.T, ctx context.Context, c *qmp.Client, name string) string {
	t.Helper()
	var children []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	// Command gives each port's device an id ("v" and its chardev's),
	// so QEMU files them under its named peripherals.
	const parent = "/machine/peripheral"
	if err := c.Execute(ctx, "qom-list", map[string]string{"path": parent}, &children); err != nil {
		t.Fatal(err)
	}
	for _, ch := range children {
		if ch.Type != "child<virtserialport>" {
			continue
		}
		path := parent + "/" + ch.Name
		var got string
		if err := c.Execute(ctx, "qom-get", map[string]string{"path": path, "property": "name"}, &got); err != nil {
			t.Fatal(err)
		}
		if got == name {
			return path
		}
	}
	t.Fatalf("no virtserialport named %q under %s (children %+v)", name, parent, children)
	return ""
}

func TestLaunchKill(t *testing.T) {
	host := probeHost(t)
	dir := socketDir(t)
	spec := pausedSpec(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := Launch(ctx, spec, host)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	if !alive(pid) {
		t.Fatalf("QEMU (pid %d) is not running after Launch", pid)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("QEMU (pid %d) still running after Kill", pid)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/proc/%d still exists after Kill: QEMU was not reaped", pid)
	}
	err = p.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Wait after Kill = %v, want an error saying QEMU was killed", err)
	}
	for _, s := range []string{spec.QMPSocket, spec.AgentSocket, spec.Ports["sbx.files"]} {
		if _, err := os.Lstat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s left behind after Kill (%v)", s, err)
		}
	}
	if err := p.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if err := p.QMP.Execute(ctx, "query-status", nil, nil); !errors.Is(err, qmp.ErrClosed) {
		t.Errorf("QMP after Kill: %v, want ErrClosed", err)
	}
}

// QEMU refusing to start is reported with its own message, whether its
// output goes to a log file or to memory.
func TestLaunchFailure(t *testing.T) {
	host := probeHost(t)
	for _, withLog := range []bool{true, false} {
		t.Run("log="+strconv.FormatBool(withLog), func(t *testing.T) {
			dir := socketDir(t)
			spec := pausedSpec(t, dir)
			spec.Paused = false
			spec.Kernel = filepath.Join(dir, "no-such-kernel")
			if !withLog {
				spec.QEMULog = ""
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p, err := Launch(ctx, spec, host)
			if err == nil {
				p.Kill()
				t.Fatal("Launch succeeded with a missing kernel")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), "no-such-kernel") || !strings.Contains(err.Error(), "exit status 1") {
				t.Errorf("error %q does not carry QEMU's message and status", err)
			}
			if _, err := os.Lstat(spec.QMPSocket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("QMP socket left behind: %v", err)
			}
		})
	}
}

func TestLaunchStaleSockets(t *testing.T) {
	host := probeHost(t)
	dir := socketDir(t)
	spec := pausedSpec(t, dir)
	// A socket left by a QEMU that was killed: bound, nobody listening.
	l, err := net.Listen("unix", spec.QMPSocket)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := Launch(ctx, spec, host)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()

	// A regular file where a socket should be is not deleted.
	if err := os.WriteFile(spec.AgentSocket, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Launch(ctx, spec, host); err == nil {
		p.Kill()
		t.Fatal("Launch replaced a regular file with a socket")
	} else if !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("error %q", err)
	}
	if b, err := os.ReadFile(spec.AgentSocket); err != nil || string(b) != "precious" {
		t.Errorf("the file at the agent socket path was changed: %q, %v", b, err)
	}
}

// TestLaunchBoot boots the real guest agent on a Debian kernel with the
// argument vector Command makes: initramfs, a per-sandbox qcow2 overlay
// over a base disk, kernel parameters from bootproto, the console on a
// socket. The agent prints its ready line and powers off, which ends QEMU.
func TestLaunchBoot(t *testing.T) {
	host := probeHost(t)
	vmlinuz, initrd, k := bootAssets(t)
	dir := socketDir(t)

	// The image's disk, and the sandbox's overlay above it.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	body := "from-the-disk\n"
	if err := tw.WriteHeader(&tar.Header{Name: "etc/hostname", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	raw := filepath.Join(dir, "base.ext4")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ext4.Build(context.Background(), f, &tb, ext4.Options{Size: 64 << 20, Label: "sbx-root", Seed: []byte("launch test"), Epoch: 1700000000, JournalBlocks: 1024}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	base := filepath.Join(dir, "base.qcow2")
	if err := qcow2.ConvertFile(context.Background(), base, raw, qcow2.Options{}); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "root.qcow2")
	if err := qcow2.CreateOverlay(overlay, base, "qcow2", 64<<20); err != nil {
		t.Fatal(err)
	}

	cfg := bootproto.DefaultConfig()
	cfg.Hostname = "launched"
	netPath, netConn := listenNet(t, dir)
	consolePath, consoleOut := listenConsole(t, dir)
	spec := VMSpec{
		Name:          "boot",
		Platform:      platform.Platform{OS: "linux", Architecture: "amd64"},
		CPUs:          1,
		MemoryBytes:   512 << 20,
		Kernel:        vmlinuz,
		Initrd:        initrd,
		Cmdline:       cfg.Params(),
		RootDisk:      overlay,
		ConsoleSocket: consolePath,
		QMPSocket:     filepath.Join(dir, "qmp.sock"),
		AgentSocket:   filepath.Join(dir, "agent.sock"),
		NetSocket:     netPath,
		QEMULog:       filepath.Join(dir, "qemu.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	start := time.Now()
	p, err := Launch(ctx, spec, host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	select {
	case <-netConn:
	case <-time.After(20 * time.Second):
		t.Error("QEMU did not connect to the network socket")
	}
	shutdown := make(chan qmp.Event, 1)
	go func() {
		for ev := range p.QMP.Events() {
			if ev.Name == "SHUTDOWN" {
				shutdown <- ev
			}
		}
	}()
	waitErr := p.Wait(ctx)
	var console []byte
	select {
	case console = <-consoleOut:
	case <-time.After(20 * time.Second):
		t.Error("QEMU did not connect the console, or did not close it on exit")
	}
	t.Logf("QEMU ran %v under %s; console:\n%s", time.Since(start).Round(time.Millisecond), host.Accel("amd64"), console)
	if ctx.Err() != nil {
		t.Fatal("the guest did not power off in time")
	}
	if waitErr != nil {
		t.Fatalf("QEMU: %v", waitErr)
	}
	ready, ok, err := bootproto.ParseReady(console)
	if err != nil || !ok {
		msg, _ := bootproto.ParseError(console)
		t.Fatalf("no ready line (%v; error line %q)", err, msg)
	}
	if ready.Hostname != "launched" || ready.Root != "/dev/vda" || ready.Kernel != k.Version {
		t.Errorf("ready %+v", ready)
	}
	argv, err := Command(spec, host)
	if err != nil {
		t.Fatal(err)
	}
	var appended string
	for i, a := range argv {
		if a == "-append" && i+1 < len(argv) {
			appended = argv[i+1]
		}
	}
	if !strings.HasPrefix(appended, "console=ttyS0 panic=-1 ") || !strings.HasSuffix(appended, " sbx.hostname=launched") {
		t.Errorf("Command's kernel command line %q", appended)
	}
	if !bytes.Contains(console, []byte("Kernel command line: "+appended)) {
		t.Errorf("the console does not show the kernel command line Command built (%q)", appended)
	}
	select {
	case ev := <-shutdown:
		var data struct {
			Guest  bool   `json:"guest"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil || !data.Guest {
			t.Errorf("SHUTDOWN %s, want one from the guest", ev.Data)
		}
	case <-time.After(10 * time.Second):
		t.Error("no SHUTDOWN event on QMP")
	}
}

// bootAssets builds the guest agent, reads the Debian kernel and writes
// the initramfs, as the image builder does.
func bootAssets(t *testing.T) (vmlinuz, initrd string, k *kernel.Kernel) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agent, err := agentbin.Build(ctx, platform.Platform{OS: "linux", Architecture: "amd64"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err = kernel.Load(context.Background(), kerneltest.DebianKernelDeb(t), kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mods, err := initramfs.KernelModules(context.Background(), k, kernel.DefaultModules)
	if err != nil {
		t.Fatal(err)
	}
	vmlinuz, initrd = filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initramfs.cpio")
	if err := os.WriteFile(vmlinuz, k.Image, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := initramfs.Write(context.Background(), &buf, initramfs.Options{AgentFile: agent, KernelVersion: k.Version, Modules: mods, Epoch: 1700000000}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(initrd, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return vmlinuz, initrd, k
}
