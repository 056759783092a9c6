package e2etest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/command"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// execMountAsSbxEnv makes the test binary act as the sbx command when
// supervisor.Spawn starts it as "<binary> supervise DIR", so that the
// sandbox TestExecFromMountInVM applies has a supervisor of this tree.
const execMountAsSbxEnv = "SBX_TEST_EXEC_MOUNT_AS_SBX"

func init() {
	if os.Getenv(execMountAsSbxEnv) == "1" && len(os.Args) > 1 && os.Args[1] == supervisor.Verb {
		os.Exit(command.Run(os.Args[1:], &command.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}))
	}
}

// execMountSpec replaces the fixture's sandbox: a read-write
// mount of ./work at /workspace, in a sandbox of one vCPU (the default a
// quickstart gets).
const execMountSpec = `
vfs "work" {
  mount "/workspace" {
    host   = "work"
    access = "rw"
  }
}

sandbox "mnt" {
  image  = image.box
  user   = "agent"
  vfs    = [vfs.work]
  cpus   = 1
  memory = "512MiB"
}
`

// execMountTimeout bounds each exec of TestExecFromMountInVM: a command
// that wedges the guest fails the test instead of hanging it.
const execMountTimeout = 2 * time.Minute

// execMountConfig makes a configuration directory from the
// fixture with execMountSpec added, and its host directory work: a shell
// script, a directory sub and the program bin/true, an ELF copied from
// the image's busybox by the first exec.
func execMountConfig(t *testing.T) (cfgDir, work string) {
	t.Helper()
	cfgDir = t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb", lockfiles.FileName} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) && name == lockfiles.FileName {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := os.ReadFile(filepath.Join(dir, "sbx.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's own sandbox is its last block: this configuration
	// has only the one with the mount, so that apply boots one VM.
	i := bytes.Index(spec, []byte("\nsandbox \"box\""))
	if i < 0 {
		t.Fatalf("no sandbox \"box\" in the fixture's configuration:\n%s", spec)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), append(spec[:i+1], execMountSpec...), 0o644); err != nil {
		t.Fatal(err)
	}
	work = filepath.Join(cfgDir, "work")
	for _, d := range []string{"sub", "bin"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "hello.sh"), []byte("#!/bin/sh\necho \"hello from the mount $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return cfgDir, work
}

// mountExecs are the commands TestExecFromMountInVM runs, each several
// times: a script stored in the mount, an ELF stored in the mount, and a
// command of the image whose working directory is below the mount's
// root. want is their output.
var mountExecs = []struct {
	name string
	cmd  sbx.Cmd
	want string
}{
	{"script", sbx.Cmd{Args: []string{"/workspace/hello.sh", "script"}}, "hello from the mount script\n"},
	{"elf", sbx.Cmd{Args: []string{"/workspace/bin/echo", "elf in the mount"}}, "elf in the mount\n"},
	{"workdir", sbx.Cmd{Args: []string{"pwd"}, Dir: "/workspace/sub"}, "/workspace/sub\n"},
	{"script-in-workdir", sbx.Cmd{Args: []string{"../hello.sh", "relative"}, Dir: "/workspace/sub"}, "hello from the mount relative\n"},
}

// copyELF is the first exec: it copies the image's busybox into the
// mount as bin/echo (busybox runs the applet its name says).
var copyELF = sbx.Cmd{Args: []string{"busybox", "cp", "/bin/busybox", "/workspace/bin/echo"}}

// TestExecFromMountInVM runs, in a sandbox of one vCPU with a read-write
// mount, commands that the kernel reads from the mount while it starts
// them: a shell script and an ELF stored in the mount, and a command
// whose working directory is below the mount's root, several times
// each. First in a VM of the Go API (the one-shot path of sbx run), then
// in a sandbox kept running by sbx apply, through sbx exec, after which
// sbx ps still shows it running and sbx plan has nothing to do; with its
// QEMU stopped, ps shows it unhealthy and plan replaces it, and once
// QEMU runs again it serves again. Every exec has a deadline: one that
// wedges the guest fails the test rather than hanging it.
func TestExecFromMountInVM(t *testing.T) {
	cfgDir, work := execMountConfig(t)

	// The one-shot path over each transport: the default (virtio-fs on
	// this host), and 9P, whose relay in the guest is the process that
	// had to be separate from the agent.
	for _, transport := range []string{"", "9p"} {
		name := "run"
		if transport != "" {
			name += "-" + transport
		}
		t.Run(name, func(t *testing.T) { execFromMount(t, cfgDir, work, transport) })
	}

	t.Run("apply", func(t *testing.T) {
		runtime, err := os.MkdirTemp("", "sbx-rt")
		if err != nil {
			t.Fatal(err)
		}
		env := append(append([]string{}, environ...), "SBX_RUNTIME_DIR="+runtime, execMountAsSbxEnv+"=1")
		sbxCLI := func(timeout time.Duration, args ...string) (int, string, string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := command.Run(args, &command.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Environ: env, Context: ctx})
			return code, stdout.String(), stderr.String()
		}
		t.Cleanup(func() {
			sbxCLI(5*time.Minute, "destroy", "-auto-approve", cfgDir)
			os.RemoveAll(runtime)
		})
		if code, out, errOut := sbxCLI(15*time.Minute, "apply", "-auto-approve", cfgDir); code != 0 {
			t.Fatalf("sbx apply: exit %d\n%s%s", code, out, errOut)
		}
		for round := range 3 {
			for _, x := range mountExecs {
				args := []string{"exec"}
				if x.cmd.Dir != "" {
					args = append(args, "-w", x.cmd.Dir)
				}
				args = append(append(args, cfgDir, "mnt", "--"), x.cmd.Args...)
				code, out, errOut := sbxCLI(execMountTimeout, args...)
				if code != 0 || out != x.want {
					console, _ := os.ReadFile(runtimeConsole(t, runtime))
					t.Fatalf("round %d, sbx %s: exit %d, output %q; want %q\n--- stderr\n%s--- console\n%s",
						round, strings.Join(args, " "), code, out, x.want, errOut, consoleTail(string(console)))
				}
			}
		}
		code, out, errOut := sbxCLI(time.Minute, "ps", cfgDir)
		if code != 0 || !strings.Contains(out, "mnt ") || !strings.Contains(out, " running ") {
			t.Errorf("sbx ps after the execs: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = sbxCLI(time.Minute, "plan", cfgDir)
		if code != 0 || !strings.Contains(out, "No changes.") {
			t.Errorf("sbx plan after the execs: exit %d\n%s%s", code, out, errOut)
		}

		// A guest that stops answering (its QEMU stopped) is unhealthy
		// in ps and replaced by plan, within their own bounds; once it
		// runs again, it is running.
		code, out, errOut = sbxCLI(time.Minute, "ps", "-json", cfgDir)
		var list []struct {
			Status    string `json:"status"`
			Unhealthy string `json:"unhealthy"`
			QEMUPid   int    `json:"qemu_pid"`
			Mounts    string `json:"mounts"`
		}
		// The supervisor's sandbox chose virtio-fs, as the Go API's.
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].QEMUPid == 0 || list[0].Mounts != "virtiofs" {
			t.Fatalf("sbx ps -json: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		qemu := list[0].QEMUPid
		if err := syscall.Kill(qemu, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				syscall.Kill(qemu, syscall.SIGCONT)
				resumed = true
			}
		}
		defer resume()
		code, out, errOut = sbxCLI(time.Minute, "ps", "-json", cfgDir)
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].Status != "unhealthy" ||
			!strings.Contains(list[0].Unhealthy, "did not answer a ping") {
			t.Errorf("sbx ps -json with the guest stopped: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		code, out, errOut = sbxCLI(time.Minute, "plan", cfgDir)
		if code != 0 || !strings.Contains(out, "must be replaced because it cannot run commands (its guest agent did not answer a ping") {
			t.Errorf("sbx plan with the guest stopped: exit %d\n%s%s", code, out, errOut)
		}
		resume()
		code, out, errOut = sbxCLI(time.Minute, "exec", cfgDir, "mnt", "--", "/workspace/hello.sh", "again")
		if code != 0 || out != "hello from the mount again\n" {
			t.Errorf("sbx exec once the guest runs again: exit %d, %q\n%s", code, out, errOut)
		}
		code, out, errOut = sbxCLI(time.Minute, "ps", cfgDir)
		if code != 0 || !strings.Contains(out, " running ") {
			t.Errorf("sbx ps once the guest runs again: exit %d\n%s%s", code, out, errOut)
		}
	})
}

// runtimeConsole returns the path of the console log of the one sandbox
// under runtime, or "" when there is none.
func runtimeConsole(t *testing.T, runtime string) string {
	var found string
	filepath.WalkDir(runtime, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == supervisor.ConsoleFile {
			found = p
		}
		return nil
	})
	return found
}

// consoleTail returns the last lines of a console log.
func consoleTail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// execFromMount is TestExecFromMountInVM's one-shot path with the
// mounts over transport ("" chooses).
func execFromMount(t *testing.T, cfgDir, work, transport string) {
	ctx, sb := startVMWith(t, cfgDir, "mnt", 15*time.Minute, sbx.StartOptions{MountTransport: transport})

	exec := func(c sbx.Cmd) (string, int, error) {
		return guestExec(ctx, sb, execMountTimeout, c)
	}
	if out, code, err := exec(copyELF); err != nil || code != 0 {
		t.Fatalf("copying busybox into the mount: exit %d, %v\n%s", code, err, out)
	}
	if fi, err := os.Stat(filepath.Join(work, "bin/echo")); err != nil || fi.Size() == 0 {
		t.Fatalf("the ELF did not reach the host: %v", err)
	}
	// Over 9P the mount's relay is a process of its own, not the agent;
	// over virtio-fs there is none, the kernel drives the device. (The
	// pattern is written so that this shell's command line does not
	// match it.)
	used, note := sb.MountTransport()
	if want := cmp.Or(transport, "virtiofs"); used != want {
		t.Fatalf("the mount went over %q (%s), not %q", used, note, want)
	}
	out, code, err := exec(sbx.Cmd{User: "root", Args: []string{"sh", "-c",
		`busybox grep ' /workspace ' /proc/mounts; for p in /proc/[0-9]*; do if busybox grep -q 'sbx-vfs-rela[y]' $p/cmdline 2>/dev/null; then echo "relay ${p#/proc/} $(busybox grep VmRSS $p/status)"; fi; done`}})
	relays := strings.Count(out, "relay ")
	if err != nil || code != 0 || strings.Contains(out, "relay 1 ") || !strings.Contains(out, " /workspace "+used+" ") ||
		used == "9p" && relays != 1 || used == "virtiofs" && relays != 0 {
		t.Fatalf("the mount and its relay over %s: exit %d, %v\n%s", used, code, err, out)
	}
	t.Logf("%s", strings.TrimSpace(out))
	for round := range 3 {
		for _, x := range mountExecs {
			out, code, err := exec(x.cmd)
			if err != nil || code != 0 || out != x.want {
				t.Fatalf("round %d, %s (%q in %q): exit %d, %v, output %q; want %q\n--- console\n%s",
					round, x.name, x.cmd.Args, x.cmd.Dir, code, err, out, x.want, consoleTail(string(sb.Console())))
			}
		}
	}
}
