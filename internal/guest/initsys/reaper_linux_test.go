package initsys_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/guest/initsys"
)

// The reaper is tested in a child process of the test, made a child
// subreaper so that orphans come to it as they come to PID 1, and so that
// its reaping cannot steal the test binary's own children.

const reaperChildEnv = "SBX_INITSYS_REAPER_CHILD"

func TestReaper(t *testing.T) {
	if os.Getenv(reaperChildEnv) == "1" {
		reaperChild()
		return
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("SKIPPING: no sh on PATH to make orphans with")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaper$", "-test.count=1")
	cmd.Env = append(os.Environ(), reaperChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reaper child: %v\n%s", err, out)
	}
	var before, reaped, after, left int
	line := lastLine(string(out), "zombies")
	if _, err := fmt.Sscanf(line, "zombies %d reaped %d left %d; with the reaper: left %d", &before, &reaped, &after, &left); err != nil {
		t.Fatalf("reaper child said %q: %v", out, err)
	}
	// sh and its two orphaned sleeps.
	if before != 3 || reaped != 3 || after != 0 {
		t.Errorf("Reap: %d zombies (want 3), reaped %d (want 3), %d left (want 0)", before, reaped, after)
	}
	if left != 0 {
		t.Errorf("StartReaper: %d zombies left (want 0)", left)
	}
}

func lastLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i]
		}
	}
	return ""
}

func reaperChild() {
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		fail(err)
	}
	// sh starts two sleeps and exits without waiting: they are orphaned
	// to this process, and all three end as zombies unless reaped.
	spawn := func() {
		if _, err := os.StartProcess(sh, []string{"sh", "-c", "sleep 0.05 & sleep 0.05 & exit 0"}, &os.ProcAttr{}); err != nil {
			fail(err)
		}
	}
	spawn()
	before := waitZombies(3, 5*time.Second)
	reaped := initsys.Reap()
	after := zombies()

	stop := initsys.StartReaper(time.Hour) // reaps on SIGCHLD only
	spawn()
	// Give the sleeps time to exit; they would be zombies by then.
	time.Sleep(300 * time.Millisecond)
	left := waitZombies(0, 5*time.Second)
	stop()
	fmt.Printf("zombies %d reaped %d left %d; with the reaper: left %d\n", before, reaped, after, left)
}

// waitZombies waits until this process has n zombie children, or the
// timeout passes, and returns how many it has.
func waitZombies(n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		z := zombies()
		if z == n || time.Now().After(deadline) {
			return z
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func zombies() int {
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if ppid == self && f[0] == "Z" {
			n++
		}
	}
	return n
}
