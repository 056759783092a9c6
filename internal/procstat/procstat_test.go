package procstat

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Stat
		bad  bool
	}{
		{in: "42 (sh) S 1 42 42 0 -1", want: Stat{'S', 1, 42, 0}},
		{in: "7 (a) b) (c) Z 3 9 9", want: Stat{'Z', 3, 9, 0}},
		{in: "7 (with space) R 2 5 5", want: Stat{'R', 2, 5, 0}},
		{in: "9 (claude) S 1 9 9 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 12 0 123456 1 2", want: Stat{'S', 1, 9, 123456}},
		{in: "7 sh S 1 2", bad: true},
		{in: "7 (sh) S x 2", bad: true},
		{in: "7 (sh) SS 1 2", bad: true},
		{in: "7 (sh) S 1", bad: true},
	} {
		got, err := Parse([]byte(c.in))
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v (error: %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestAliveAndZombie(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no /proc on " + runtime.GOOS)
	}
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Not yet waited for: it becomes a zombie, which is not alive.
	deadline := time.Now().Add(10 * time.Second)
	for Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s, err := Read(pid)
	if err != nil || !s.Zombie() || Alive(pid) {
		t.Errorf("an exited child: Read = %+v, %v; Alive = %v", s, err, Alive(pid))
	}
	cmd.Wait()
	if Alive(pid) {
		t.Error("a reaped child is alive")
	}
}
