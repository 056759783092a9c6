package machine_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// guestRAMResident returns how much of QEMU process pid's guest RAM
// mapping (the one anonymous, writable, non-executable mapping of exactly
// memory bytes) is resident on the host.
func guestRAMResident(t *testing.T, pid int, memory int64) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var found int
	var rss int64
	inRAM := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			inRAM = err1 == nil && err2 == nil && int64(end-start) == memory && len(f) == 5 && f[1][:3] == "rw-"
			if inRAM {
				found++
			}
			continue
		}
		if inRAM && len(f) == 3 && f[0] == "Rss:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps: %q", sc.Text())
			}
			rss += kb << 10
		}
	}
	if found != 1 {
		t.Fatalf("QEMU has %d anonymous mappings of %d MiB; want exactly one, the guest RAM", found, memory>>20)
	}
	return rss
}

// TestFreedMemoryReturns: memory the guest touches and then frees goes
// back to the host. The guest writes 512 MiB to a tmpfs, which makes QEMU
// hold it, then frees it; through the balloon's free page reporting the
// guest's kernel tells QEMU which pages are free, and QEMU gives them back
// to the host within seconds. Without reporting (the balloon absent, its
// driver not loaded, or free-page-reporting=off) they stay resident for
// the life of the machine.
func TestFreedMemoryReturns(t *testing.T) {
	t.Parallel()
	_, cfg, img := machinetest.Require(t)
	sb := cfg.Sandboxes[machinetest.Sandbox]
	const memory = 1 << 30
	const fill = 512 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := machine.Start(ctx, machine.Options{Name: sb.Name, Boot: bootFiles(t, img), CPUs: 1, Memory: memory})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })

	if out := run(t, m, "root", 0, "ls", "/sys/bus/virtio/drivers"); !strings.Contains(out, "virtio_balloon") {
		t.Errorf("the guest's virtio drivers are %q; virtio_balloon is not loaded", strings.Fields(out))
	}
	before := guestRAMResident(t, m.Pid(), memory)
	var out bytes.Buffer
	ectx, ecancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ecancel()
	script := fmt.Sprintf("busybox mkdir -p /run/fill && busybox mount -t tmpfs -o size=%dm fill /run/fill && busybox dd if=/dev/zero of=/run/fill/f bs=1M count=%d",
		fill>>20+64, fill>>20)
	st, err := m.Exec(ectx, guestconn.Cmd{Args: []string{"sh", "-c", script}, User: "root", Stdout: &out, Stderr: &out})
	if err != nil || !st.Success() {
		t.Fatalf("filling a tmpfs: %v %v\n%s", st, err, out.String())
	}
	filled := guestRAMResident(t, m.Pid(), memory)
	// The guest's writes must have reached the host's memory, or the
	// rest proves nothing.
	if filled-before < fill*3/4 {
		t.Fatalf("the guest RAM resident went from %d to %d MiB with %d MiB written; want it to grow by most of that", before>>20, filled>>20, fill>>20)
	}
	run(t, m, "root", 0, "busybox", "umount", "/run/fill")

	// The guest reports free blocks two seconds after they are freed,
	// then in rounds; allow for a slow, shared host.
	deadline := time.Now().Add(45 * time.Second)
	var now int64
	for {
		now = guestRAMResident(t, m.Pid(), memory)
		if now <= before+fill/4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("guest RAM resident on the host: %d MiB idle, %d MiB with %d MiB written, %d MiB once freed", before>>20, filled>>20, fill>>20, now>>20)
	if now > before+fill/4 {
		t.Errorf("45 s after the guest freed %d MiB, QEMU still holds %d MiB of guest RAM (%d MiB before the guest wrote them); the freed memory did not go back to the host",
			fill>>20, now>>20, before>>20)
	}
}
