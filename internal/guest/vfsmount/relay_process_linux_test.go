package vfsmount

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// kernelStandIn replaces mount(2) for a test: each call is handed the
// descriptor the mount options name and what the kernel's client
// would do with it.
func kernelStandIn(t *testing.T, calls []func(fd int) error) *int {
	t.Helper()
	n := new(int)
	old := sysMount
	t.Cleanup(func() { sysMount = old })
	sysMount = func(source, target, fstype string, flags uintptr, data string) error {
		var fd int
		for _, opt := range strings.Split(data, ",") {
			if v, ok := strings.CutPrefix(opt, "rfdno="); ok {
				fd, _ = strconv.Atoi(v)
			}
		}
		i := *n
		*n++
		if i >= len(calls) {
			t.Errorf("mount(2) called %d times, want %d", i+1, len(calls))
			return syscall.EINVAL
		}
		return calls[i](fd)
	}
	return n
}

// tversion is a version request as the kernel's client sends it.
var tversion = []byte("\x15\x00\x00\x00\x64\xff\xff\x00\x00\x08\x00\x08\x009P2000.L")

// sendVersion writes the version request, then waits for an answer as
// the kernel does, without a bound of its own: it returns once the
// relay's end closes, or with nil once an answer is read.
func sendVersion(fd int) error {
	if _, err := syscall.Write(fd, tversion); err != nil {
		return err
	}
	return awaitAnswer(fd)
}

func awaitAnswer(fd int) error {
	buf := make([]byte, 64)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		return err
	}
	if n == 0 {
		return syscall.ECONNRESET
	}
	return nil
}

// portPair is a port for mountOn and the host's end of it.
func portPair(t *testing.T) (*os.File, net.Conn) {
	t.Helper()
	hostEnd, portEnd := socketpair.New(t)
	port, err := portEnd.(fileConn).File()
	if err != nil {
		t.Fatal(err)
	}
	portEnd.Close()
	t.Cleanup(func() { port.Close() })
	return port, hostEnd
}

// A host that never answers the kernel's version request must not keep
// the mount waiting: once the bound passes, the relay is killed and
// Mount says what it carried — here the request reached the port and
// nothing came back — and does not try again, since the host has the
// request.
func TestMountUnansweredEndsWithWhatTheRelaySaw(t *testing.T) {
	port, hostEnd := portPair(t)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(hostEnd) // reads, never answers
		got <- b
	}()
	calls := kernelStandIn(t, []func(int) error{sendVersion})
	const bound = 500 * time.Millisecond
	begin := time.Now()
	err := mountOn(context.Background(), port, t.TempDir(), Options{Timeout: bound})
	took := time.Since(begin)
	if err == nil {
		t.Fatal("mount succeeded with a host that never answers")
	}
	for _, want := range []string{
		"did not finish within 500ms",
		"the relay read 21 bytes from the kernel and wrote 21 to the port; it read 0 from the port and wrote 0 to the kernel",
		"no answer came back",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nwant it to say %q", err, want)
		}
	}
	if took > bound+killWait {
		t.Errorf("mount returned after %v; bound %v", took, bound)
	}
	if *calls != 1 {
		t.Errorf("mount(2) called %d times; a request the host has is not sent again", *calls)
	}
	// The relay is gone: the host's end sees the end of the port.
	port.Close()
	select {
	case b := <-got:
		if string(b) != string(tversion) {
			t.Errorf("the host read %q, want the version request", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the port's host end did not end with the relay")
	}
}

// A request that never reached the port leaves the host's stream as it
// was: the mount is tried once more with a fresh relay, and that one
// can succeed.
func TestMountTriesAgainWhenNothingReachedThePort(t *testing.T) {
	port, hostEnd := portPair(t)
	go func() {
		// Answer the one version request that arrives.
		buf := make([]byte, len(tversion))
		if _, err := io.ReadFull(hostEnd, buf); err != nil {
			return
		}
		hostEnd.Write(tversion)
		io.Copy(io.Discard, hostEnd)
	}()
	calls := kernelStandIn(t, []func(int) error{awaitAnswer, sendVersion})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := mountOn(ctx, port, t.TempDir(), Options{Timeout: 500 * time.Millisecond}); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if *calls != 2 {
		t.Errorf("mount(2) called %d times, want 2", *calls)
	}
}

// A relay whose status pipe nobody reads (the agent, waiting in a vfork
// for a command stored on the mount to start) still carries everything:
// its counts lines are dropped, never waited for.
func TestRelayDoesNotWaitOnItsStatusPipe(t *testing.T) {
	hostEnd, portEnd := socketpair.New(t)
	relayEnd, kernelEnd := socketpair.New(t)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer statusR.Close()
	var files []*os.File
	for _, c := range []net.Conn{portEnd, relayEnd} {
		f, err := c.(fileConn).File()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	relay := exec.Command("/proc/self/exe", RelayArg, "/w")
	relay.ExtraFiles = append(files, statusW)
	relay.Stderr = os.Stderr
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		relay.Process.Kill()
		relay.Wait()
	}()
	for _, f := range append(files, statusW) {
		f.Close()
	}
	portEnd.Close()
	relayEnd.Close()

	// Far more status than a pipe holds: four lines per round trip.
	go io.Copy(hostEnd, hostEnd) // the host echoes
	kernelEnd.SetDeadline(time.Now().Add(60 * time.Second))
	msg := []byte("0123456789abcdef")
	buf := make([]byte, len(msg))
	for i := 0; i < countedBytes/len(msg)-1; i++ {
		if _, err := kernelEnd.Write(msg); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		if _, err := io.ReadFull(kernelEnd, buf); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
}

// When the second attempt fails too, the error says what both saw.
func TestMountSecondAttemptReportsBoth(t *testing.T) {
	port, hostEnd := portPair(t)
	go io.Copy(io.Discard, hostEnd)
	kernelStandIn(t, []func(int) error{awaitAnswer, awaitAnswer})
	err := mountOn(context.Background(), port, t.TempDir(), Options{Timeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("mounted with a kernel that sends nothing")
	}
	if got := err.Error(); strings.Count(got, "the kernel sent no request") != 2 || !strings.Contains(got, "attempt 2, with a fresh relay") {
		t.Errorf("error %q; want both attempts' evidence", got)
	}
}
