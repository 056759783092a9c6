package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sbx-dev/sbx/internal/procstat"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"golang.org/x/sys/unix"
)

// childEnv makes the test binary run as a supervisor (RunDir on its last
// argument) instead of running tests: the stand-in for "sbx supervise".
const childEnv = "SBX_SUPERVISOR_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(impostorEnv) == "1" {
		os.Exit(impostor(os.Args[1:]))
	}
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		err := RunDir(ctx, os.Args[len(os.Args)-1], Options{Logger: log})
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	machinetest.Cleanup()
	os.Exit(code)
}

// TestSpawnVM spawns a detached supervisor of a real VM, runs commands
// from two clients through its socket, stops it, and checks that nothing
// is left: no QEMU, no supervisor, no sockets.
func TestSpawnVM(t *testing.T) {
	_, cfg, img := machinetest.Require(t)
	sb := cfg.Sandboxes[machinetest.Sandbox]
	dir, err := os.MkdirTemp("", "sbx-sup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	si, err := pipeline.SandboxImage(img)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Spawn(ctx, dir, Spec{Name: sb.Name, Image: si, CPUs: sb.CPUs, Memory: sb.Memory},
		SpawnOptions{Command: []string{os.Args[0]}, Env: append(os.Environ(), childEnv+"=1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if procstat.Alive(st.QEMUPid) {
			syscall.Kill(-st.QEMUPid, syscall.SIGKILL)
		}
		if procstat.Alive(st.Pid) {
			syscall.Kill(st.Pid, syscall.SIGKILL)
		}
	})
	t.Logf("supervisor %d runs QEMU %d under %s (%s)", st.Pid, st.QEMUPid, st.Accel, st.Note)
	if st.Pid == os.Getpid() || !procstat.Alive(st.Pid) || !procstat.Alive(st.QEMUPid) {
		t.Fatalf("status %+v: the supervisor and QEMU should run as other processes", st)
	}
	if sid, err := unix.Getsid(st.Pid); err != nil || sid != st.Pid {
		t.Errorf("the supervisor's session is %d (%v), want its own (%d)", sid, err, st.Pid)
	}

	var wg sync.WaitGroup
	for i := range 2 {
		c, err := Dial(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			in := strings.Repeat(fmt.Sprintf("client %d\n", i), 10_000)
			var out bytes.Buffer
			st, err := c.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", "cat; hostname"}, Stdin: strings.NewReader(in), Stdout: &out})
			if err != nil || !st.Success() {
				t.Errorf("client %d: %v, %v", i, st, err)
				return
			}
			if want := in + machinetest.Sandbox + "\n"; out.String() != want {
				t.Errorf("client %d: %d bytes of output, want %d", i, out.Len(), len(want))
			}
		})
	}
	wg.Wait()

	if err := Stop(ctx, dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for procstat.Alive(st.Pid) || procstat.Alive(st.QEMUPid) {
		if time.Now().After(deadline) {
			t.Fatalf("after Stop: supervisor alive %v, QEMU alive %v", procstat.Alive(st.Pid), procstat.Alive(st.QEMUPid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range []string{SocketFile, ControlFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", name, err)
		}
	}
	if end, err := ReadStatus(dir); err != nil || end.State != StateStopped || end.Error != "" {
		t.Errorf("final status %+v, %v", end, err)
	}
	if _, err := Dial(ctx, dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Dial after Stop = %v, want ErrNotRunning", err)
	}
	if err := Stop(ctx, dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Stop after Stop = %v, want ErrNotRunning", err)
	}
}
