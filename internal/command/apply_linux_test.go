package command

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/sbx-dev/sbx/internal/procstat"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/state"
)

// world is a configuration directory made from the machinetest fixture,
// with its own state and its own runtime directory for supervisors.
type world struct {
	t       *testing.T
	dir     string
	runtime string
	environ []string
}

// newWorld copies the fixture's configuration (sbx.hcl, its lock and the
// two packages, hard-linked) into a fresh directory, adding extra to
// sbx.hcl. Its image is the fixture's, already in the cache.
func newWorld(t *testing.T, extra string) *world {
	t.Helper()
	f, _, _ := machinetest.Require(t)
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sbx.hcl", lockfiles.FileName, "kernel.deb", "busybox.deb"} {
		src, dst := filepath.Join(f.Dir, name), filepath.Join(dir, name)
		if err := os.Link(src, dst); err != nil {
			b, rerr := os.ReadFile(src)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if extra != "" {
		spec, err := os.ReadFile(filepath.Join(dir, "sbx.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "sbx.hcl")) // it may be a link to the fixture's
		if err := os.WriteFile(filepath.Join(dir, "sbx.hcl"), append(spec, extra...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Unix socket paths are short: the runtime directory cannot live
	// under t.TempDir's long names.
	runtime, err := os.MkdirTemp("", "sbx-rt")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, dir: dir, runtime: runtime,
		environ: append(append([]string{}, f.Environ...), "SBX_RUNTIME_DIR="+runtime, asSbxEnv+"=1")}
	t.Cleanup(func() {
		// Whatever a failed test left running goes.
		Run([]string{"destroy", "-auto-approve", dir}, &Env{Environ: w.environ, Context: context.Background()})
		for _, pid := range processesUnder(runtime) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		os.RemoveAll(runtime)
	})
	return w
}

// sbx runs the command line in the world and returns its exit code and
// output.
func (w *world) sbx(stdin io.Reader, args ...string) (int, string, string) {
	w.t.Helper()
	return w.sbxContext(context.Background(), stdin, args...)
}

func (w *world) sbxContext(ctx context.Context, stdin io.Reader, args ...string) (int, string, string) {
	w.t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	code := Run(args, &Env{Stdin: stdin, Stdout: &stdout, Stderr: &stderr, Environ: w.environ, Context: ctx})
	out := stdout.String()
	if len(out) > 4000 {
		out = out[:2000] + "\n[…]\n" + out[len(out)-1000:]
	}
	w.t.Logf("sbx %s: exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out, stderr.String())
	return code, stdout.String(), stderr.String()
}

// must runs the command line and fails the test unless it exits with 0.
func (w *world) must(args ...string) string {
	w.t.Helper()
	code, stdout, _ := w.sbx(nil, args...)
	if code != 0 {
		w.t.Fatalf("sbx %s: exit %d", strings.Join(args, " "), code)
	}
	return stdout
}

// runtimeOf returns the runtime state records for sandbox name.
func (w *world) runtimeOf(name string) *state.Runtime {
	w.t.Helper()
	st, err := state.Load(w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	r := st.Lookup(addrs.SandboxRef(name))
	if r == nil || r.Sandbox == nil || r.Sandbox.Runtime == nil {
		w.t.Fatalf("state records no running sandbox.%s", name)
	}
	return r.Sandbox.Runtime
}

// processesUnder returns the processes whose command line names dir (the
// supervisors and QEMUs of its sandboxes); zombies do not count.
func processesUnder(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(dir+"/")) {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid runs; a zombie does not count.
func alive(pid int) bool { return procstat.Alive(pid) }

// socketsUnder returns the unix sockets left under dir.
func socketsUnder(dir string) []string {
	var socks []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSocket != 0 {
			socks = append(socks, p)
		}
		return nil
	})
	return socks
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	for i := 0; alive(pid); i++ {
		if i > 500 {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestApplyLifecycle takes one sandbox through its life with the command
// line, as a user would: plan, apply, exec (identity, streams, exit
// codes, signals), cp both ways, ps, status, logs; a second apply while
// the state is locked; the supervisor killed with SIGKILL, which plan
// reports and apply repairs; destroy, after which no process or socket of
// the sandbox is left.
func TestApplyLifecycle(t *testing.T) {
	w := newWorld(t, "")

	code, out, _ := w.sbx(nil, "plan", "-detailed-exitcode", w.dir)
	if code != ExitChanges || !strings.Contains(out, `+ sandbox "box"`) {
		t.Fatalf("plan before apply: exit %d, want 2 and the sandbox to create", code)
	}
	if code, _, stderr := w.sbx(nil, "apply", w.dir); code != ExitError || !strings.Contains(stderr, "-auto-approve") {
		t.Errorf("apply without a terminal or -auto-approve: exit %d, want 1 and a hint", code)
	}
	out = w.must("apply", "-auto-approve", w.dir)
	if !strings.Contains(out, "Apply complete! 2 created") {
		t.Errorf("apply did not report the image and the sandbox created")
	}
	rt := w.runtimeOf("box")
	if !alive(rt.Pid) || !alive(rt.QEMUPid) {
		t.Fatalf("state records supervisor %d and QEMU %d, which do not run", rt.Pid, rt.QEMUPid)
	}
	if out := w.must("apply", "-auto-approve", w.dir); !strings.Contains(out, "No changes") {
		t.Errorf("a second apply should find nothing to do")
	}

	t.Run("exec", func(t *testing.T) {
		_, out, _ := w.sbx(nil, "exec", w.dir, "box", "--", "uname", "-a")
		if !strings.HasPrefix(out, "Linux box ") {
			t.Errorf("uname -a: %q, want Linux with the sandbox's host name", out)
		}
		if _, out, _ := w.sbx(nil, "exec", w.dir, "box", "--", "id"); !strings.HasPrefix(out, "uid=1000(agent) gid=1000") {
			t.Errorf("id as the spec's user: %q", out)
		}
		if _, out, _ := w.sbx(nil, "exec", "-u", "root", w.dir, "box", "--", "id"); !strings.HasPrefix(out, "uid=0(root) gid=0(root)") {
			t.Errorf("id as root: %q", out)
		}
		in := make([]byte, 3<<20)
		rand.Read(in)
		sum := sha256.Sum256(in)
		code, out, _ := w.sbx(bytes.NewReader(in), "exec", "-i", w.dir, "box", "--", "sha256sum")
		if code != 0 || !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
			t.Errorf("stdin hash in the guest: exit %d, %q; want %x", code, out, sum)
		}
		if code, _, _ := w.sbx(nil, "exec", w.dir, "box", "--", "sh", "-c", "exit 7"); code != 7 {
			t.Errorf("exit 7 came back as %d", code)
		}
		if code, _, _ := w.sbx(nil, "exec", w.dir, "box", "--", "sh", "-c", "kill -KILL $$"); code != 128+9 {
			t.Errorf("a command killed by SIGKILL came back as %d, want 137", code)
		}
	})

	t.Run("cp-and-50MB-stream", func(t *testing.T) {
		big := make([]byte, 50<<20)
		rand.Read(big)
		sum := sha256.Sum256(big)
		src := filepath.Join(t.TempDir(), "big")
		if err := os.WriteFile(src, big, 0o640); err != nil {
			t.Fatal(err)
		}
		w.must("cp", w.dir, src, "box:/tmp/")
		// The file streamed back on stdout: 50 MiB through the
		// supervisor, the agent's flow control and the CLI.
		var stdout bytes.Buffer
		// Copied in as root, mode 0640: root reads it.
		code := Run([]string{"exec", "-u", "root", w.dir, "box", "--", "cat", "/tmp/big"}, &Env{Stdout: &stdout, Stderr: io.Discard, Environ: w.environ, Context: context.Background()})
		if got := sha256.Sum256(stdout.Bytes()); code != 0 || got != sum {
			t.Errorf("cat of the copied file: exit %d, %d bytes, hash %x; want %d bytes, %x", code, stdout.Len(), got, len(big), sum)
		}
		back := filepath.Join(t.TempDir(), "back")
		w.must("cp", w.dir, "box:/tmp/big", back)
		b, err := os.ReadFile(back)
		if err != nil || sha256.Sum256(b) != sum {
			t.Errorf("copied back: %d bytes, %v; want the same file", len(b), err)
		}
		if fi, err := os.Stat(back); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("copied back with mode %v (%v), want the guest file's 0640", fi.Mode(), err)
		}
		if code, _, stderr := w.sbx(nil, "cp", w.dir, "box:/no/such/file", back); code != ExitError || !strings.Contains(stderr, "/no/such/file") {
			t.Errorf("cp of a missing file: exit %d, want 1 naming it", code)
		}
	})

	t.Run("ps-status-logs", func(t *testing.T) {
		out := w.must("ps", w.dir)
		if !strings.Contains(out, "box") || !strings.Contains(out, "running") || !strings.Contains(out, strconv.Itoa(rt.Pid)) {
			t.Errorf("ps does not show the running sandbox")
		}
		var st sandboxStatus
		if err := json.Unmarshal([]byte(w.must("status", "-json", w.dir, "box")), &st); err != nil || st.Status != "running" || st.QEMUPid != rt.QEMUPid {
			t.Errorf("status -json: %+v, %v", st, err)
		}
		logs := w.must("logs", w.dir, "box")
		if !strings.Contains(logs, "==> console") || !strings.Contains(logs, "sbx-guest: ready") || !strings.Contains(logs, "machine started") {
			t.Errorf("logs lack the console's ready line or the supervisor's start")
		}
		// Following a log runs until interrupted.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if code, out, _ := w.sbxContext(ctx, nil, "logs", "-f", "-supervisor", w.dir, "box"); code != 0 || !strings.Contains(out, "msg=serving") {
			t.Errorf("logs -f: exit %d, want 0 and the supervisor's log", code)
		}
		if strings.Contains(logs, "sbx-guest: warning") {
			t.Errorf("the guest warned while the supervisor took over its agent port")
		}
	})

	t.Run("state-lock", func(t *testing.T) {
		lease, err := state.Lock(context.Background(), w.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Close()
		code, _, stderr := w.sbx(nil, "apply", "-auto-approve", w.dir)
		if code != ExitError || !strings.Contains(stderr, "Cannot lock the state") || !strings.Contains(stderr, strconv.Itoa(os.Getpid())) {
			t.Errorf("apply while another run holds the state lock: exit %d, want 1 naming the holder", code)
		}
	})

	t.Run("kill-supervisor", func(t *testing.T) {
		syscall.Kill(rt.Pid, syscall.SIGKILL)
		waitDead(t, rt.Pid)
		code, out, _ := w.sbx(nil, "plan", "-detailed-exitcode", w.dir)
		want := fmt.Sprintf("must be replaced because it no longer runs (its supervisor (pid %d) has exited; its QEMU (pid %d) still runs)", rt.Pid, rt.QEMUPid)
		if code != ExitChanges || !strings.Contains(out, want) {
			t.Errorf("plan after the supervisor was killed: exit %d; want 2 and %q", code, want)
		}
		if out := w.must("ps", w.dir); !strings.Contains(out, "gone") {
			t.Errorf("ps does not show the sandbox gone")
		}
		out = w.must("apply", "-auto-approve", w.dir)
		if !strings.Contains(out, "1 replaced") {
			t.Errorf("apply did not replace the sandbox")
		}
		if alive(rt.QEMUPid) {
			t.Errorf("the orphaned QEMU %d still runs after apply", rt.QEMUPid)
		}
		nrt := w.runtimeOf("box")
		if nrt.Pid == rt.Pid || !alive(nrt.Pid) || !alive(nrt.QEMUPid) {
			t.Errorf("after apply, state records %+v", nrt)
		}
		if code, out, _ := w.sbx(nil, "exec", w.dir, "box", "--", "cat", "/etc/motd"); code != 0 || out != "sbx test sandbox\n" {
			t.Errorf("exec in the re-created sandbox: exit %d, %q", code, out)
		}
		rt = nrt
	})

	t.Run("policy-update-in-place", func(t *testing.T) {
		path := filepath.Join(w.dir, "sbx.hcl")
		spec, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(spec), "sandbox \"box\" {\n", "sandbox \"box\" {\n  egress = [egress.web]\n", 1) +
			"\negress \"web\" {\n  allow = [\"api.example.com\"]\n}\n"
		os.Remove(path) // a link to the fixture's
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := w.sbx(nil, "apply", "-auto-approve", w.dir)
		if code != 0 || !strings.Contains(out, "will be updated in place") || !strings.Contains(out, "[widens]") || !strings.Contains(out, "1 updated") {
			t.Errorf("apply of a new egress rule: exit %d, want an in-place update that widens", code)
		}
		if strings.Contains(stderr, "declares egress") {
			t.Errorf("apply says egress is not enforced: %s", stderr)
		}
		if nrt := w.runtimeOf("box"); nrt.Pid != rt.Pid || !alive(nrt.Pid) {
			t.Errorf("the policy update restarted the sandbox: supervisor %d, was %d", nrt.Pid, rt.Pid)
		}
		// The running supervisor enforces the new policy: the name it
		// allows now resolves, to an address of the sandbox network's own
		// (no query leaves the host), and one it does not stays unknown.
		if code, out, _ := w.sbx(nil, "exec", w.dir, "box", "--", "nslookup", "api.example.com"); code != 0 || !strings.Contains(out, "198.18.") {
			t.Errorf("nslookup of the newly allowed name: exit %d, %q", code, out)
		}
		if code, out, _ := w.sbx(nil, "exec", w.dir, "box", "--", "nslookup", "other.example.com"); code == 0 || strings.Contains(out, "198.18.") {
			t.Errorf("nslookup of a name not allowed: exit %d, %q", code, out)
		}
		if code, out, _ := w.sbx(nil, "logs", "-egress", w.dir, "box"); code != 0 || !strings.Contains(out, "other.example.com") {
			t.Errorf("logs -egress: exit %d, %q; want the refused name", code, out)
		}
	})

	t.Run("secret-added-then-rotated", func(t *testing.T) {
		path := filepath.Join(w.dir, "sbx.hcl")
		spec, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(spec), "  egress = [egress.web]\n", "  egress = [egress.web]\n  secrets = [secret.token]\n", 1) +
			"\nsecret \"token\" {\n  env    = \"TOKEN\"\n  hosts  = [\"api.example.com\"]\n  source = \"env:SBX_TEST_TOKEN\"\n}\n"
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		// Without the value, nothing changes.
		if code, _, stderr := w.sbx(nil, "apply", "-auto-approve", w.dir); code == 0 || !strings.Contains(stderr, "SBX_TEST_TOKEN") {
			t.Errorf("apply without the secret's value: exit %d, stderr %q", code, stderr)
		}
		environ := w.environ
		defer func() { w.environ = environ }()
		w.environ = append(slices.Clone(environ), "SBX_TEST_TOKEN=first-value-0123456789")
		code, out, stderr := w.sbx(nil, "apply", "-auto-approve", w.dir)
		if code != 0 || !strings.Contains(out, "1 updated") {
			t.Fatalf("apply of a new secret: exit %d\n%s\n%s", code, out, stderr)
		}
		_, placeholder, _ := w.sbx(nil, "exec", w.dir, "box", "--", "sh", "-c", "echo $TOKEN")
		if !strings.HasPrefix(placeholder, "sbx_ph_token_") {
			t.Errorf("the guest's TOKEN after the update: %q; want its placeholder", placeholder)
		}
		w.environ = append(slices.Clone(environ), "SBX_TEST_TOKEN=second-value-9876543210")
		code, out, stderr = w.sbx(nil, "apply", "-auto-approve", w.dir)
		if code != 0 || !strings.Contains(out, "No changes") || !strings.Contains(out, "sandbox.box: secrets read again") {
			t.Errorf("apply after a rotation: exit %d\n%s\n%s", code, out, stderr)
		}
		if _, again, _ := w.sbx(nil, "exec", w.dir, "box", "--", "sh", "-c", "echo $TOKEN"); again != placeholder {
			t.Errorf("the placeholder changed with the rotation: %q, was %q", again, placeholder)
		}
		if nrt := w.runtimeOf("box"); nrt.Pid != rt.Pid {
			t.Errorf("the secret's update restarted the sandbox")
		}
		// A binding in the user's bindings file takes the secret over:
		// the plan has no change, the binding's command runs in sbx
		// apply, and the running sandbox gets its value without a
		// restart.
		bound := filepath.Join(t.TempDir(), "bound-ran")
		bindings := filepath.Join(hostenv.Get(w.environ, "HOME"), ".config", "sbx", "bindings.hcl")
		if err := os.MkdirAll(filepath.Dir(bindings), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bindings, []byte("binding \"token\" {\n  source = \"command:touch "+bound+"; echo third-value-0123456789\"\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(bindings)
		code, out, stderr = w.sbx(nil, "apply", "-auto-approve", w.dir)
		if code != 0 || !strings.Contains(out, "No changes") || !strings.Contains(out, "sandbox.box: secrets read again") ||
			!strings.Contains(out, "secret.token: command (bindings ~/.config/sbx/bindings.hcl:1)") {
			t.Errorf("apply with a binding: exit %d\n%s\n%s", code, out, stderr)
		}
		if _, err := os.Stat(bound); err != nil {
			t.Errorf("apply did not run the binding's command: %v", err)
		}
		if nrt := w.runtimeOf("box"); nrt.Pid != rt.Pid {
			t.Errorf("the binding restarted the sandbox")
		}
		// The values reach the supervisor on a pipe and the control
		// socket only: none of the files in its directory holds them.
		ents, err := os.ReadDir(rt.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(rt.Dir, e.Name()))
			if err != nil {
				continue // sockets, directories
			}
			if strings.Contains(string(b), "first-value-0123456789") || strings.Contains(string(b), "second-value-9876543210") ||
				strings.Contains(string(b), "third-value-0123456789") {
				t.Errorf("%s holds a secret's value", e.Name())
			}
		}
	})

	out = w.must("destroy", "-auto-approve", w.dir)
	if !strings.Contains(out, "Destroy complete! 2 destroyed.") {
		t.Errorf("destroy did not report the sandbox and the image")
	}
	if alive(rt.Pid) || alive(rt.QEMUPid) {
		t.Errorf("after destroy, supervisor %d or QEMU %d still runs", rt.Pid, rt.QEMUPid)
	}
	if left := processesUnder(w.runtime); len(left) > 0 {
		t.Errorf("processes left after destroy: %v", left)
	}
	if socks := socketsUnder(w.runtime); len(socks) > 0 {
		t.Errorf("sockets left after destroy: %v", socks)
	}
	if ents, err := os.ReadDir(w.runtime); err != nil || len(ents) > 0 {
		t.Errorf("the runtime directory still holds %v (%v)", ents, err)
	}
	if _, err := os.Stat(rt.Dir); !os.IsNotExist(err) {
		t.Errorf("the supervisor directory %s is still there (%v)", rt.Dir, err)
	}
	if st, err := state.Load(w.dir); err != nil || len(st.Resources) != 0 {
		t.Errorf("state after destroy: %v, %v", st, err)
	}
	if code, _, stderr := w.sbx(nil, "exec", w.dir, "box", "--", "true"); code != ExitError || !strings.Contains(stderr, "not running") {
		t.Errorf("exec after destroy: exit %d, want 1 saying it is not running", code)
	}
}

// TestApplyFour runs four sandboxes at once on this small machine, execs
// in all of them concurrently, destroys one by name and then the rest.
func TestApplyFour(t *testing.T) {
	var extra strings.Builder
	names := []string{"box", "b2", "b3", "b4"}
	for _, n := range names[1:] {
		fmt.Fprintf(&extra, "\nsandbox %q {\n  image  = image.box\n  cpus   = 1\n  memory = \"256MiB\"\n}\n", n)
	}
	w := newWorld(t, extra.String())
	planFile := filepath.Join(t.TempDir(), "plan")
	w.must("plan", "-out", planFile, w.dir)
	out := w.must("apply", "-plan", planFile, w.dir)
	if !strings.Contains(out, "5 created") {
		t.Errorf("apply of the saved plan did not create the image and four sandboxes")
	}
	if code, _, stderr := w.sbx(nil, "apply", "-plan", planFile, w.dir); code != ExitError || !strings.Contains(stderr, "The saved plan is out of date") {
		t.Errorf("a saved plan applied twice: exit %d, want 1 saying it is out of date", code)
	}
	var qemus []int
	for _, n := range names {
		rt := w.runtimeOf(n)
		if !alive(rt.QEMUPid) {
			t.Errorf("sandbox.%s: QEMU %d does not run", n, rt.QEMUPid)
		}
		qemus = append(qemus, rt.QEMUPid)
	}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stdout bytes.Buffer
			code := Run([]string{"exec", w.dir, n, "--", "hostname"}, &Env{Stdout: &stdout, Stderr: io.Discard, Environ: w.environ, Context: context.Background()})
			if code != 0 || stdout.String() != n+"\n" {
				t.Errorf("hostname in sandbox.%s: exit %d, %q", n, code, stdout.String())
			}
		}()
	}
	wg.Wait()
	ps := w.must("ps", w.dir)
	if got := strings.Count(ps, "running"); got != 4 {
		t.Errorf("ps shows %d running sandboxes, want 4", got)
	}
	var all []runtimeEntry
	if err := json.Unmarshal([]byte(w.must("ps", "-a", "-json")), &all); err != nil || len(all) != 4 {
		t.Errorf("ps -a -json: %d sandboxes (%v), want 4", len(all), err)
	}
	for _, e := range all {
		if e.Status != "running" || e.ConfigDir != w.dir || e.QEMUPid == 0 {
			t.Errorf("ps -a: %+v, want running in %s", e, w.dir)
		}
	}

	w.must("destroy", "-auto-approve", w.dir, "b3")
	waitDead(t, qemus[2])
	if code, _, _ := w.sbx(nil, "exec", w.dir, "b2", "--", "true"); code != 0 {
		t.Errorf("destroying b3 disturbed b2")
	}
	if code, _, _ := w.sbx(nil, "plan", "-detailed-exitcode", w.dir); code != ExitChanges {
		t.Errorf("plan after destroying b3 should want it back")
	}
	// A VM that crashes takes its supervisor with it: plan says why, and
	// destroy leaves nothing behind.
	b4 := w.runtimeOf("b4")
	syscall.Kill(b4.QEMUPid, syscall.SIGKILL)
	waitDead(t, b4.Pid)
	code, out, _ := w.sbx(nil, "plan", w.dir)
	if want := fmt.Sprintf("its supervisor (pid %d) has exited: supervisor: sandbox b4: the machine exited on its own", b4.Pid); code != 0 || !strings.Contains(out, want) {
		t.Errorf("plan after the VM crashed: exit %d, want the reason %q", code, want)
	}
	if out := w.must("logs", "-console", w.dir, "b4"); !strings.Contains(out, `sbx-guest: ready {"kernel"`) || !strings.Contains(out, `"hostname":"b4"`) {
		t.Errorf("the crashed VM's console was not kept for sbx logs")
	}
	w.must("destroy", "-auto-approve", w.dir)
	for _, pid := range qemus {
		if alive(pid) {
			t.Errorf("QEMU %d still runs after destroy", pid)
		}
	}
	if left := processesUnder(w.runtime); len(left) > 0 {
		t.Errorf("processes left after destroy: %v", left)
	}
	if socks := socketsUnder(w.runtime); len(socks) > 0 {
		t.Errorf("sockets left after destroy: %v", socks)
	}
}

// TestApplyInterrupted interrupts an apply while its sandbox boots: sbx
// exits with 130, nothing of the sandbox runs afterwards, and the state
// does not claim it does.
func TestApplyInterrupted(t *testing.T) {
	w := newWorld(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Interrupt once the supervisor has started booting.
		for ctx.Err() == nil {
			if len(processesUnder(w.runtime)) >= 2 { // supervisor and QEMU
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	code, out, _ := w.sbxContext(ctx, nil, "apply", "-auto-approve", w.dir)
	if code != ExitInterrupted || !strings.Contains(out, "Interrupted") {
		t.Errorf("exit %d, want 130 and a message", code)
	}
	if left := processesUnder(w.runtime); len(left) > 0 {
		t.Errorf("processes left after the interrupted apply: %v", left)
	}
	st, err := state.Load(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Lookup(addrs.SandboxRef("box")); r != nil {
		t.Errorf("state records the sandbox whose start was interrupted: %+v", r.Sandbox.Runtime)
	}
	if code, out, _ := w.sbx(nil, "plan", "-detailed-exitcode", w.dir); code != ExitChanges || !strings.Contains(out, `+ sandbox "box"`) {
		t.Errorf("plan after the interrupted apply should still create the sandbox")
	}
}
