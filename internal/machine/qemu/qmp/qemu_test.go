//go:build unix

package qmp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

// startQEMU starts a real QEMU with its CPUs stopped, no disk and no
// kernel, and a QMP socket; it returns the socket path and the command.
func startQEMU(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	qemu := qemutest.Require(t)
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	var stderr bytes.Buffer
	cmd := exec.Command(qemu, "-no-user-config", "-nodefaults", "-display", "none",
		"-machine", "q35", "-accel", "tcg", "-m", "64", "-S",
		"-chardev", "socket,id=qmp,path="+sock+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control")
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("QEMU stderr:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return sock, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU made no QMP socket within 20s; stderr: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type status struct {
	Status  string `json:"status"`
	Running bool   `json:"running"`
}

func TestRealQEMU(t *testing.T) {
	sock, cmd := startQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var v Version
	if err := c.Execute(ctx, "query-version", nil, &v); err != nil {
		t.Fatal(err)
	}
	if v.QEMU.Major < 2 || v != c.Greeting().Version {
		t.Errorf("query-version = %+v, greeting says %+v", v, c.Greeting().Version)
	}
	out, err := exec.Command(cmd.Path, "-version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "version "+v.String()) {
		t.Errorf("QMP says version %s; -version says %s", v, out)
	}

	var st status
	if err := c.Execute(ctx, "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Status != "prelaunch" {
		t.Errorf("started with -S: status = %+v, want prelaunch, not running", st)
	}

	// query-qmp-schema is far over the 64 KiB that breaks fixed-buffer
	// clients.
	var raw json.RawMessage
	if err := c.Execute(ctx, "query-qmp-schema", nil, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) <= 64<<10 {
		t.Errorf("query-qmp-schema reply is %d bytes; the test needs one over 64 KiB", len(raw))
	}
	var schema []struct {
		Name     string `json:"name"`
		MetaType string `json:"meta-type"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	commands := 0
	for _, e := range schema {
		if e.MetaType == "command" {
			commands++
		}
	}
	if commands < 100 {
		t.Errorf("schema lists %d commands", commands)
	}
	t.Logf("query-qmp-schema: %d bytes, %d entries, %d commands", len(raw), len(schema), commands)

	// Unknown commands come back as CommandNotFound.
	err = c.Execute(ctx, "no-such-command", nil, nil)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Errorf("unknown command: err = %v, want CommandNotFound", err)
	}

	// cont and stop, with their events.
	if err := c.Execute(ctx, "cont", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, "RESUME")
	if err := c.Execute(ctx, "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Status != "running" {
		t.Errorf("after cont: status = %+v", st)
	}
	if err := c.Execute(ctx, "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, "STOP")
	if err := c.Execute(ctx, "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Status != "paused" {
		t.Errorf("after stop: status = %+v", st)
	}

	// Many callers at once, with different reply types.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if i%2 == 0 {
				var s status
				if err := c.Execute(ctx, "query-status", nil, &s); err != nil || s.Status != "paused" {
					t.Errorf("concurrent query-status: %+v, %v", s, err)
				}
				return
			}
			var v2 Version
			if err := c.Execute(ctx, "query-version", nil, &v2); err != nil || v2 != v {
				t.Errorf("concurrent query-version: %+v, %v", v2, err)
			}
		})
	}
	wg.Wait()

	// quit: the reply, the SHUTDOWN event, the end of the connection and
	// of the process.
	if err := c.Execute(ctx, "quit", nil, nil); err != nil && !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	ev := waitEvent(t, c, "SHUTDOWN")
	var data struct {
		Guest  bool   `json:"guest"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(ev.Data, &data); err != nil || data.Guest || data.Reason != "host-qmp-quit" {
		t.Errorf("SHUTDOWN data = %s (%v)", ev.Data, err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the connection did not end after quit")
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("QEMU exited with %v after quit", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("QEMU did not exit after quit")
	}
}

// waitEvent waits for the named event, skipping others.
func waitEvent(t *testing.T, c *Client, name string) Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("events ended before %s", name)
			}
			if ev.Name == name {
				if ev.Time.IsZero() || time.Since(ev.Time) > time.Hour {
					t.Errorf("%s has time %v", name, ev.Time)
				}
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 20s", name)
		}
	}
}
