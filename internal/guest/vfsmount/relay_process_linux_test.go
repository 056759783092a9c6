package vfsmount

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"

	"github.com/sbx-dev/sbx/internal/socketpair"
	"github.com/sbx-dev/sbx/internal/vfs"
	"github.com/sbx-dev/sbx/policy"
)

// starterEnv makes the test binary the stand-in for the agent in
// TestRelayRunsWhileTheAgentCannot: it starts a relay process on
// descriptors 3 (the port) and 4 (the kernel's socket), says so, and
// stops itself.
const starterEnv = "SBX_VFSMOUNT_TEST_STARTER"

func TestMain(m *testing.M) {
	// Started by startRelayProcess as "/proc/self/exe sbx-vfs-relay PATH".
	if len(os.Args) > 1 && os.Args[1] == RelayArg {
		os.Exit(RunRelay())
	}
	if os.Getenv(starterEnv) == "1" {
		os.Exit(starter())
	}
	os.Exit(m.Run())
}

// starter is the agent's part: start the relay as Mount does, close its
// own copies, report the relay's pid, then stop, as an agent whose every
// thread waits (a vfork'd child blocked on the mount holds its only P).
func starter() int {
	port, sock := os.NewFile(3, "port"), os.NewFile(4, "sock")
	r, err := startRelayProcess("/w", port, sock)
	port.Close()
	sock.Close()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(r.proc.Pid)
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	return 0
}

// The relay is a process of its own: it carries 9P while the process
// that started it (the agent) cannot run at all. In one vCPU the agent
// is exactly that while a child it started execs a file of the mount or
// changes into a directory of it: Go starts children with vfork, and the
// thread waiting for the child keeps the runtime's only processor, so a
// relay among the agent's goroutines would never carry the request the
// child's exec waits on.
func TestRelayRunsWhileTheAgentCannot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho from the mount\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := vfs.New(policy.Mount{Guest: "/w", Host: ".", Access: policy.ReadWrite},
		vfs.Options{HostDir: dir, UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hostEnd, portEnd := socketpair.New(t)
	relayEnd, kernelEnd := socketpair.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, hostEnd) }()

	var files []*os.File
	for _, c := range []interface{ File() (*os.File, error) }{portEnd.(fileConn), relayEnd.(fileConn)} {
		f, err := c.File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	agent := exec.Command("/proc/self/exe")
	agent.Env = append(os.Environ(), starterEnv+"=1")
	agent.ExtraFiles = files
	agent.Stderr = os.Stderr
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		agent.Process.Kill()
		agent.Wait()
	}()
	// The test's copies go: the relay's end is the end of both.
	for _, f := range files {
		f.Close()
	}
	portEnd.Close()
	relayEnd.Close()
	var relayPid int
	if _, err := fmt.Fscan(bufio.NewReader(out), &relayPid); err != nil {
		t.Fatalf("the stand-in agent did not start a relay: %v", err)
	}
	// Wait until it has stopped itself (a loaded machine can take
	// seconds to schedule it).
	for i := 0; ; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", agent.Process.Pid))
		if st := procState(b); st == 'T' {
			break
		}
		if i > 3000 {
			t.Fatal("the stand-in agent did not stop within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The client has a deadline: a relay that does not carry fails the
	// test instead of hanging it.
	kernelEnd.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := p9.NewClient(kernelEnd, p9.WithMessageSize(64<<10))
	if err != nil {
		t.Fatalf("9P through the relay while the agent is stopped: %v", err)
	}
	root, err := c.Attach("")
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	_, f, err := root.Walk([]string{"run.sh"})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		t.Fatalf("open: %v", err)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "#!/bin/sh\necho from the mount\n" {
		t.Errorf("read %q, %v", buf[:n], err)
	}

	// The host's end closing ends the relay process.
	cancel()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Errorf("Serve did not return")
	}
	for i := 0; ; i++ {
		if err := syscall.Kill(relayPid, 0); err == syscall.ESRCH {
			break
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", relayPid))
		if procState(b) == 'Z' {
			break // ended; its parent, stopped, has not reaped it
		}
		if i > 500 {
			t.Fatal("the relay process did not end with the host's end")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fileConn is a connection whose descriptor can be duplicated.
type fileConn interface{ File() (*os.File, error) }

// procState returns the state letter of a /proc/PID/stat line.
func procState(stat []byte) byte {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' && i+2 < len(stat) {
			return stat[i+2]
		}
	}
	return 0
}
