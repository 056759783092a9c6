package qemu

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestCommandFSSlots: each slot is a hot-pluggable root port of its own
// chassis and slot, named as AddFS plugs into it.
func TestCommandFSSlots(t *testing.T) {
	s := testSpec()
	s.FSSlots = 2
	argv, err := Command(s, testHost())
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"pcie-root-port,id=fsport0,chassis=1,slot=1", "pcie-root-port,id=fsport1,chassis=2,slot=2"} {
		if !slices.Contains(argv, want) {
			t.Errorf("slot %d: no %q in %q", i, want, argv)
		}
	}
	s.FSSlots = 0
	if argv, _ := Command(s, testHost()); slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "pcie-root-port") }) {
		t.Errorf("root ports without slots asked for: %q", argv)
	}
}

// TestAddFSRefuses: AddFS checks its slot, its tag and the machine's
// memory before it asks QEMU anything (the Process has no monitor here:
// reaching it would panic).
func TestAddFSRefuses(t *testing.T) {
	sock, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	for _, c := range []struct {
		p    *Process
		slot int
		tag  string
		want string
	}{
		{&Process{fsSlots: 1, sharedRAM: true}, 1, "sbx-fs-0", "slot 1: the machine has 1"},
		{&Process{fsSlots: 1, sharedRAM: true}, -1, "sbx-fs-0", "slot -1"},
		{&Process{fsSlots: 1, sharedRAM: true}, 0, "a,b", `tag "a,b"`},
		{&Process{fsSlots: 1, sharedRAM: true}, 0, strings.Repeat("a", MaxFSTag+1), "36 at most"},
		{&Process{fsSlots: 1, sharedRAM: true}, 0, "", `tag ""`},
		{&Process{fsSlots: 1}, 0, "sbx-fs-0", "not shared memory"},
	} {
		err := c.p.AddFS(context.Background(), c.slot, c.tag, sock)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddFS(%d, %q) = %v, want an error mentioning %q", c.slot, c.tag, err, c.want)
		}
	}
}
