package machine_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// The tests boot real VMs (TCG on this kind of machine) from an image the
// sbx builders made of the real Debian kernel and busybox; see package
// machinetest. At most two run at once.

func TestMain(m *testing.M) {
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// start boots the fixture's sandbox and stops it when the test ends.
func start(t testing.TB, opts machine.Options) *machine.Machine {
	t.Helper()
	_, cfg, img := machinetest.Require(t)
	sb := cfg.Sandboxes[machinetest.Sandbox]
	opts.Name = sb.Name
	opts.Boot = bootFiles(t, img)
	opts.CPUs, opts.Memory = sb.CPUs, sb.Memory
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := machine.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

// run runs a command as user and returns its stdout; any stderr, an error
// or another exit than want fails the test.
func run(t *testing.T, m *machine.Machine, user string, want int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := m.Exec(ctx, guestconn.Cmd{Args: args, User: user, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	if st.Code != want || stderr.Len() > 0 {
		t.Fatalf("%q as %q: %v, stderr %q; want exit %d", args, user, st, stderr.String(), want)
	}
	return stdout.String()
}

func TestMachine(t *testing.T) {
	t.Parallel()
	_, _, img := machinetest.Require(t)
	m := start(t, machine.Options{})
	t.Logf("booted in %v under %s (%s); agent %s", m.BootTime().Round(time.Millisecond), m.Accel(), m.Host().Note, m.Client().Guest().Software)
	dir, pid := m.Dir(), m.Pid()

	if r := m.Ready(); r.Mode != bootproto.ModeServe || r.Kernel != img.KernelVersion || r.Hostname != machinetest.Sandbox {
		t.Errorf("ready line %+v, want mode serve, kernel %s, host name %s", r, img.KernelVersion, machinetest.Sandbox)
	}
	for _, f := range []string{machine.OverlayFile, machine.ConsoleFile, machine.QMPSocket, machine.AgentSocket, machine.CtlSocket} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the machine's directory lacks %s: %v", f, err)
		}
	}
	// The network and console sockets took QEMU's connection and no
	// other.
	for _, f := range []string{machine.NetSocket, machine.ConsoleSocket} {
		if _, err := os.Lstat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there once QEMU has connected: %v", f, err)
		}
	}

	t.Run("uname", func(t *testing.T) {
		out := run(t, m, "", 0, "uname", "-a")
		if !strings.HasPrefix(out, "Linux box ") || !strings.Contains(out, img.KernelVersion) {
			t.Errorf("uname -a = %q, want Linux, the host name box and kernel %s", out, img.KernelVersion)
		}
	})
	t.Run("users", func(t *testing.T) {
		if out := run(t, m, "root", 0, "id"); !strings.HasPrefix(out, "uid=0(root) gid=0(root)") {
			t.Errorf("id as root = %q", out)
		}
		want := "uid=" + strconv.Itoa(machinetest.UID) + "(" + machinetest.User + ")"
		if out := run(t, m, machinetest.User, 0, "id"); !strings.HasPrefix(out, want) {
			t.Errorf("id as %s = %q, want %s", machinetest.User, out, want)
		}
		if out := run(t, m, machinetest.User, 0, "pwd"); out != "/home/agent\n" {
			t.Errorf("the default working directory is %q, want the user's home", out)
		}
	})
	t.Run("network-sealed", func(t *testing.T) { networkSealed(t, m) })
	t.Run("stdin", func(t *testing.T) {
		in := make([]byte, 3<<20+17)
		rand.Read(in)
		var out bytes.Buffer
		st, err := m.Exec(context.Background(), guestconn.Cmd{Args: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
		if err != nil || !st.Success() {
			t.Fatalf("cat: %v %v", st, err)
		}
		if sha256.Sum256(out.Bytes()) != sha256.Sum256(in) {
			t.Errorf("cat gave back %d bytes that differ from the %d sent", out.Len(), len(in))
		}
		// And hashed in the guest.
		sum := sha256.Sum256(in)
		var hash bytes.Buffer
		if st, err := m.Exec(context.Background(), guestconn.Cmd{Args: []string{"sha256sum"}, Stdin: bytes.NewReader(in), Stdout: &hash}); err != nil || !st.Success() {
			t.Fatalf("sha256sum: %v %v", st, err)
		}
		if got := strings.Fields(hash.String()); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
			t.Errorf("sha256sum in the guest = %q, want %x", hash.String(), sum)
		}
	})
	t.Run("50MB-stdout", func(t *testing.T) {
		const n = 50 << 20
		h := sha256.New()
		count := &countWriter{w: h}
		start := time.Now()
		st, err := m.Exec(context.Background(), guestconn.Cmd{Args: []string{"head", "-c", strconv.Itoa(n), "/dev/zero"}, Stdout: count})
		if err != nil || !st.Success() {
			t.Fatalf("head: %v %v", st, err)
		}
		el := time.Since(start)
		want := sha256.Sum256(make([]byte, n))
		if count.n != n || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Errorf("got %d bytes hashing to %x, want %d zero bytes (%x)", count.n, h.Sum(nil), n, want)
		}
		t.Logf("50 MiB of stdout in %v (%.1f MiB/s)", el.Round(time.Millisecond), float64(n)/(1<<20)/el.Seconds())
	})
	t.Run("exit-code", func(t *testing.T) {
		run(t, m, "", 7, "sh", "-c", "exit 7")
	})
	t.Run("signal", func(t *testing.T) {
		st, err := m.Exec(context.Background(), guestconn.Cmd{Args: []string{"sh", "-c", "kill -TERM $$"}})
		if err != nil {
			t.Fatal(err)
		}
		if st.Signal != "SIGTERM" || st.Code != -1 {
			t.Errorf("status %v, want killed by SIGTERM", st)
		}
	})
	t.Run("pty", func(t *testing.T) {
		var out bytes.Buffer
		st, err := m.Exec(context.Background(), guestconn.Cmd{
			Args: []string{"sh", "-c", "test -t 0 && test -t 1 && echo on a tty; ls -l /dev/fd/"}, User: machinetest.User,
			PTY: &guestconn.PTY{Rows: 24, Cols: 80}, Stdout: &out,
		})
		if err != nil || !st.Success() || !strings.HasPrefix(out.String(), "on a tty\r\n") || !strings.Contains(out.String(), "/dev/pts/") {
			t.Errorf("a command on a terminal, as %s: %v %v %q", machinetest.User, st, err, out.String())
		}
	})
	t.Run("files", func(t *testing.T) {
		body := []byte("put by the host\n")
		owner := &guestconn.Owner{UID: machinetest.UID, GID: machinetest.UID}
		if err := m.Put(context.Background(), bytes.NewReader(body), "/home/agent/note.txt", 0o600, owner); err != nil {
			t.Fatal(err)
		}
		if out := run(t, m, machinetest.User, 0, "cat", "note.txt"); out != string(body) {
			t.Errorf("the user reads %q", out)
		}
		var got bytes.Buffer
		fi, err := m.Get(context.Background(), "/etc/motd", &got)
		if err != nil || got.String() != "sbx test sandbox\n" || fi.UID != 0 {
			t.Errorf("Get /etc/motd: %q %+v %v", got.String(), fi, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"sleep", "60"}})
		if !errors.Is(err, context.DeadlineExceeded) || st == nil || st.Signal != "SIGKILL" {
			t.Errorf("a cancelled exec: %v, %v; want the deadline and a SIGKILL status", st, err)
		}
	})

	// Stop powers the guest off on request: no kill needed, nothing left.
	// A process that ignores SIGTERM does not hold the power-off up.
	if _, err := m.StartProcess(context.Background(), guestconn.Cmd{Args: []string{"sh", "-c", "trap '' TERM; sleep 600"}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	if err := m.Stop(context.Background()); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	checkGone(t, pid, dir)
}

// checkGone checks that QEMU's process and the machine's directory are gone.
func checkGone(t *testing.T, pid int, dir string) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		t.Errorf("QEMU (pid %d) is still there after Stop: %v %s", pid, err, b)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the machine's directory %s is still there: %v", dir, err)
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}

// TestNeverReady boots guests whose agent never answers: each start must
// fail within its timeout, say why with the console's tail, and leave
// nothing behind.
func TestNeverReady(t *testing.T) {
	t.Parallel()
	_, cfg, img := machinetest.Require(t)
	sb := cfg.Sandboxes[machinetest.Sandbox]
	host, err := qemu.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()

	corrupt := *img
	corrupt.Outputs = map[string]image.Output{}
	for k, v := range img.Outputs {
		corrupt.Outputs[k] = v
	}
	junk := filepath.Join(parent, "junk.cpio")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not an initramfs "), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt.Outputs[image.OutputInitramfs] = image.Output{Path: junk}

	for _, c := range []struct {
		name    string
		opts    machine.Options
		image   *image.Result // nil: the fixture's
		within  time.Duration
		wantErr []string
	}{
		// The agent prints its ready line and powers off.
		{"ready-poweroff", machine.Options{Mode: bootproto.ModeReadyPowerOff, BootTimeout: 2 * time.Minute}, nil, 2 * time.Minute,
			[]string{"the guest stopped before its agent answered", bootproto.ReadyPrefix}},
		// No /init: the kernel panics, and the machine cannot reboot.
		{"corrupt-initramfs", machine.Options{BootTimeout: 2 * time.Minute}, &corrupt, 2 * time.Minute,
			[]string{"the guest stopped before its agent answered", "Kernel panic"}},
		// Still booting when the time is up.
		{"timeout", machine.Options{BootTimeout: 1500 * time.Millisecond}, nil, 10 * time.Second,
			[]string{"the guest agent did not answer within 1.5s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Name, opts.CPUs, opts.Memory, opts.Hypervisor, opts.Dir = sb.Name, sb.CPUs, sb.Memory, qemu.New(&host), parent
			im := c.image
			if im == nil {
				im = img
			}
			opts.Boot = bootFiles(t, im)
			begin := time.Now()
			m, err := machine.Start(context.Background(), opts)
			took := time.Since(begin)
			if err == nil {
				m.Stop(context.Background())
				t.Fatal("Start succeeded")
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if took > c.within {
				t.Errorf("Start took %v, longer than %v", took, c.within)
			}
			for _, want := range append(c.wantErr, "sandbox box did not become ready", "console (console.log), last lines:") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error lacks %q", want)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(parent, "sbx-*")); len(left) > 0 {
				t.Errorf("a failed start left %v", left)
			}
		})
	}
}

// TestStopUnresponsive freezes QEMU so that the guest cannot power off:
// Stop must kill it within the stop timeout and leave nothing behind.
func TestStopUnresponsive(t *testing.T) {
	t.Parallel()
	m := start(t, machine.Options{StopTimeout: 2 * time.Second})
	pid, dir := m.Pid(), m.Dir()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err := m.Stop(context.Background())
	took := time.Since(begin)
	if err == nil || !strings.Contains(err.Error(), "did not power off within 2s; killed it") {
		t.Errorf("Stop = %v, want it to say the guest was killed", err)
	}
	if took > 10*time.Second {
		t.Errorf("Stop took %v", took)
	}
	checkGone(t, pid, dir)
}

// bootFiles is what a machine boots of img, as a sandbox boots it
// (pipeline.BootFiles).
func bootFiles(t testing.TB, img *image.Result) machine.BootFiles {
	t.Helper()
	b, err := pipeline.BootFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
