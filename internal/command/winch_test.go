//go:build linux

package command

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/supervisor"
	"golang.org/x/sys/unix"
)

// TestExecWinch runs "sbx exec -t" on a real pseudo-terminal of the host
// and checks that the command in the guest starts with that terminal's
// size and follows it when sbx gets SIGWINCH.
func TestExecWinch(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Fatalf("this test needs pseudo-terminals: %v", err)
	}
	configDir, environ := execGuest(t, supervisor.Spec{Name: "box"})

	// The guest's shell prints its terminal's size, then waits for
	// SIGWINCH and prints the size again.
	const script = `trap 'stty size; exit 7' WINCH; stty size; while :; do sleep 0.05; done`
	for _, tc := range []struct {
		name   string
		flags  []string
		stdout bool // stdout is the terminal too (else a pipe)
	}{
		{name: "terminal", flags: []string{"-i", "-t"}, stdout: true},
		{name: "stdin", flags: []string{"-t"}, stdout: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPTY(t)
			setSize(t, slave, 33, 111)
			out, stdout := master, slave
			if !tc.stdout {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close(); w.Close() })
				out, stdout = r, w
			}
			lines := readLines(out)

			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			args := append([]string{"exec"}, tc.flags...)
			args = append(args, configDir, "box", "--", "sh", "-c", script)
			exited := make(chan int, 1)
			go func() {
				exited <- Run(args, &Env{Stdin: slave, Stdout: stdout, Stderr: &stderr, Environ: environ, Context: ctx})
				if !tc.stdout {
					stdout.Close() // ends readLines
				}
			}()

			size := func(what string) string {
				t.Helper()
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("%s: the output ended; stderr %q", what, stderr.String())
					}
					return l
				case <-ctx.Done():
					t.Fatalf("%s: no output in time", what)
				}
				return ""
			}
			if got := size("the first size"); got != "33 111" {
				t.Fatalf("the command started on a %s terminal, want 33 111", got)
			}

			setSize(t, slave, 44, 122)
			if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
				t.Fatal(err)
			}
			if got := size("the size after SIGWINCH"); got != "44 122" {
				t.Errorf("after SIGWINCH the command sees a %s terminal, want 44 122", got)
			}
			select {
			case code := <-exited:
				if code != 7 {
					t.Errorf("exit code %d, want 7; stderr %q", code, stderr.String())
				}
			case <-ctx.Done():
				t.Fatal("sbx exec did not return")
			}
			if leaked := stacksWith("command.forwardResizes"); leaked != "" {
				t.Errorf("a resize forwarder still runs after sbx exec returned:\n%s", leaked)
			}
		})
	}
}

// openPTY opens a pseudo-terminal pair; both ends are closed when the
// test ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	raw, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ioctlErr error
	err = raw.Control(func(fd uintptr) {
		if ioctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioctlErr != nil { // unlockpt
			return
		}
		n, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN) // ptsname
	})
	if err == nil {
		err = ioctlErr
	}
	if err != nil {
		t.Fatalf("/dev/ptmx: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Closing the master ends a read still blocked on the slave.
	t.Cleanup(func() { master.Close(); slave.Close() })
	return master, slave
}

// setSize sets a terminal's size, as a terminal emulator does when its
// window changes.
func setSize(t *testing.T, f *os.File, rows, cols uint16) {
	t.Helper()
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ioctlErr error
	err = raw.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err == nil {
		err = ioctlErr
	}
	if err != nil {
		t.Fatalf("setting the size of %s: %v", f.Name(), err)
	}
}

// readLines sends the non-empty lines of r, carriage returns trimmed,
// until reading r fails.
func readLines(r *os.File) <-chan string {
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(r)
		for s.Scan() {
			if l := strings.TrimSpace(s.Text()); l != "" {
				lines <- l
			}
		}
	}()
	return lines
}

// stacksWith returns the stacks of the goroutines that are in a
// function whose name contains fn.
func stacksWith(fn string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			found = append(found, g)
		}
	}
	return strings.Join(found, "\n\n")
}
