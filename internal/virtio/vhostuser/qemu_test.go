//go:build linux

package vhostuser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const qemuPath = "/usr/bin/qemu-system-x86_64"

// recorder is a slog handler that keeps the request names the backend
// logs and passes every record on to the test log.
type recorder struct {
	slog.Handler
	mu   *sync.Mutex
	reqs *[]string
}

func (r recorder) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Message == "vhost-user: request" {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "req" {
				r.mu.Lock()
				*r.reqs = append(*r.reqs, a.Value.String())
				r.mu.Unlock()
			}
			return true
		})
	}
	return r.Handler.Handle(ctx, rec)
}

func (r recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(*r.reqs)
}

// TestQEMURealize starts QEMU paused, with no guest, and a
// vhost-user-fs-pci device whose chardev is one end of a socket pair; the
// backend must complete the device's realize handshake and QEMU must stay
// up until it is told to quit.
func TestQEMURealize(t *testing.T) {
	for _, requestQueues := range []int{1, 2} {
		t.Run(fmt.Sprintf("num-request-queues=%d", requestQueues), func(t *testing.T) { testQEMURealize(t, requestQueues) })
	}
}

func testQEMURealize(t *testing.T, requestQueues int) {
	if _, err := os.Stat(qemuPath); err != nil {
		if os.Getenv("SBX_NO_VM") == "1" {
			t.Skipf("no QEMU at %s and SBX_NO_VM=1: %v", qemuPath, err)
		}
		t.Fatalf("QEMU is needed at %s (set SBX_NO_VM=1 to skip): %v", qemuPath, err)
	}
	ours, theirs := unixPair(t)
	theirsFile, err := theirs.File()
	if err != nil {
		t.Fatal(err)
	}
	defer theirsFile.Close()
	theirs.Close()

	rec := recorder{Handler: testLogger(t).Handler(), mu: &sync.Mutex{}, reqs: new([]string)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ours, &upper{}, Options{Queues: 1 + requestQueues, Logger: slog.New(rec)})
	}()

	cmd := exec.Command(qemuPath,
		"-nodefaults", "-display", "none", "-machine", "q35", "-accel", "tcg", "-m", "256",
		"-object", "memory-backend-memfd,id=mem,size=256M,share=on", "-machine", "memory-backend=mem",
		"-chardev", "socket,id=vfs,fd=3",
		"-device", fmt.Sprintf("vhost-user-fs-pci,chardev=vfs,tag=t,num-request-queues=%d", requestQueues),
		"-S", "-qmp", "stdio")
	cmd.ExtraFiles = []*os.File{theirsFile}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirsFile.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	reaped := false
	defer func() {
		if !reaped {
			cmd.Process.Signal(syscall.SIGKILL) // this test's QEMU, by its PID
			select {
			case <-exited:
			case <-time.After(waitLimit):
				t.Errorf("QEMU (pid %d) did not exit after SIGKILL", cmd.Process.Pid)
			}
		}
		if t.Failed() {
			t.Logf("QEMU stderr:\n%s", stderr.String())
		}
	}()

	lines := make(chan map[string]any, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	// next returns the next QMP message that has key, skipping events.
	next := func(key string) map[string]any {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("QEMU closed its QMP stream waiting for %q; backend saw %v", key, rec.requests())
				}
				if _, ok := m[key]; ok {
					return m
				}
				if e, ok := m["error"]; ok {
					t.Fatalf("QMP error: %v", e)
				}
			case err := <-exited:
				reaped = true
				t.Fatalf("QEMU exited (%v) waiting for %q; backend saw %v", err, key, rec.requests())
			case <-timeout:
				t.Fatalf("no QMP %q; backend saw %v", key, rec.requests())
			}
		}
	}
	command := func(name string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(stdin, `{"execute":"`+name+`"}`+"\n"); err != nil {
			t.Fatal(err)
		}
		return next("return")
	}

	next("QMP") // the greeting: devices are realized
	command("qmp_capabilities")
	status := command("query-status")
	if r, _ := status["return"].(map[string]any); r["status"] != "prelaunch" {
		t.Fatalf("query-status = %v", status)
	}
	got := rec.requests()
	t.Logf("requests at realize: %v", got)
	for _, want := range []string{"GET_FEATURES", "GET_PROTOCOL_FEATURES", "SET_PROTOCOL_FEATURES", "GET_QUEUE_NUM", "SET_OWNER", "SET_VRING_CALL"} {
		if !slices.Contains(got, want) {
			t.Errorf("QEMU's realize sent no %s: %v", want, got)
		}
	}
	if n := countOf(got, "SET_VRING_CALL"); n != 1+requestQueues {
		t.Errorf("%d SET_VRING_CALL at realize, want one per queue (%d)", n, 1+requestQueues)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve ended during realize: %v", err)
	default:
	}

	command("quit")
	select {
	case err := <-exited:
		reaped = true
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("QEMU did not quit")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve = %v after QEMU quit", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return after QEMU quit")
	}
	t.Logf("all requests: %v", rec.requests())
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
