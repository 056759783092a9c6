package supervisor

import (
	"os/exec"
	"testing"
)

// TestLeaseEnds checks what a supervisor reads of its lease: none holds,
// a live process holds, the same id with another start time (a reused
// id) has ended, and so has an exited process.
func TestLeaseEnds(t *testing.T) {
	dir := t.TempDir()
	if why := leaseEnded(dir); why != "" {
		t.Errorf("no lease ended: %s", why)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	l, err := LeaseOf(cmd.Process.Pid)
	if err != nil || l.Start == 0 {
		t.Fatalf("LeaseOf: %+v, %v", l, err)
	}
	l.Holder = "claude session x"
	if err := WriteLease(dir, l); err != nil {
		t.Fatal(err)
	}
	if why := leaseEnded(dir); why != "" {
		t.Errorf("a live process's lease ended: %s", why)
	}
	if got, err := ReadLease(dir); err != nil || got != l {
		t.Errorf("ReadLease = %+v, %v; want %+v", got, err, l)
	}
	reused := l
	reused.Start++
	WriteLease(dir, reused)
	if why := leaseEnded(dir); why == "" {
		t.Error("a lease on another start time of the same id holds")
	}
	WriteLease(dir, l)
	cmd.Process.Kill()
	cmd.Wait()
	if why := leaseEnded(dir); why == "" {
		t.Error("an exited process's lease holds")
	}
	if err := WriteLease(dir, Lease{}); err == nil {
		t.Error("a lease on process 0 was written")
	}
}
