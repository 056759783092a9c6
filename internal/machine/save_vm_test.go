package machine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// saved boots the fixture's sandbox with its RAM in a file and saves
// it: the state, memory and disk a resume starts from.
func saved(t *testing.T) (opts machine.Options, state, memory, disk string) {
	t.Helper()
	_, cfg, img := machinetest.Require(t)
	sb := cfg.Sandboxes[machinetest.Sandbox]
	dir := t.TempDir()
	state, memory, disk = filepath.Join(dir, "state"), filepath.Join(dir, "memory"), filepath.Join(dir, "disk.qcow2")
	opts = machine.Options{Name: "saved", Boot: bootFiles(t, img), CPUs: sb.CPUs, Memory: sb.Memory, MAC: "52:54:00:aa:bb:cc"}
	src := opts
	src.MemoryFile = memory
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := machine.Start(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	// What the saved guest holds, every resumed one starts with.
	run(t, m, "root", 0, "sh", "-c", "echo before > /root/mark")
	f, err := os.Create(state)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	begin := time.Now()
	if err := m.Save(ctx, f, disk); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved in %v", time.Since(begin))
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the saved machine still runs")
	}
	if _, err := os.Stat(m.Dir()); !os.IsNotExist(err) {
		t.Errorf("the saved machine's directory is still there: %v", err)
	}
	return opts, state, memory, disk
}

// resume starts a machine from a saved one and stops it when the test
// ends.
func resume(t *testing.T, opts machine.Options, state string, mem *os.File, disk string) *machine.Machine {
	t.Helper()
	st, err := os.Open(state)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer st.Close()
	opts.Resume = &machine.Resume{State: st, Memory: mem, Disk: disk, MAC: opts.MAC}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := machine.Start(ctx, opts)
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

// sealed loads the saved memory as resumes map it.
func sealed(t *testing.T, memory string) *os.File {
	t.Helper()
	file, err := os.Open(memory)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	mem, err := machine.SealMemory(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

// TestSaveResume saves a booted machine and resumes two from it at once,
// sharing one copy of its memory: each runs commands, sees what the saved
// guest wrote, and keeps what it writes itself from the other and from
// the saved memory and disk; one freeing its memory costs the other
// nothing; and a memory file that is not sealed is refused.
func TestSaveResume(t *testing.T) {
	opts, state, memory, disk := saved(t)
	before := map[string][]byte{}
	for _, f := range []string{state, memory, disk} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	mem := sealed(t, memory)
	var ms [2]*machine.Machine
	var wg sync.WaitGroup
	for i := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Name = []string{"one", "two"}[i]
			ms[i] = resume(t, o, state, mem, disk)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, m := range ms {
		if !m.Resumed() {
			t.Errorf("machine %d was booted, not resumed", i)
		}
		t.Logf("machine %d started in %v", i, m.BootTime())
		if got := run(t, m, "root", 0, "cat", "/root/mark"); got != "before\n" {
			t.Errorf("machine %d: /root/mark = %q", i, got)
		}
		run(t, m, "root", 0, "sh", "-c", "echo "+m.Name()+" > /root/mark; sync")
	}
	// The first guest frees what it can, which its kernel reports to
	// QEMU as free (the balloon's free page reporting, in blocks of 2
	// MiB or more, after ~2 s): QEMU gives those pages back to the
	// host, and the shared memory must keep them for the other guest.
	run(t, ms[0], "root", 0, "sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches; sleep 5")
	if got := run(t, ms[1], "root", 0, "sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches; cat /root/mark; ls / | wc -l"); !strings.HasPrefix(got, "two\n") {
		t.Errorf("the second machine after the first freed its memory: %q", got)
	}
	for i, m := range ms {
		if got := run(t, m, "root", 0, "cat", "/root/mark"); strings.TrimSpace(got) != m.Name() {
			t.Errorf("machine %d: /root/mark = %q, want its own", i, got)
		}
	}
	plain, err := os.OpenFile(memory, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	st, _ := os.Open(state)
	defer st.Close()
	o := opts
	o.Name = "unsealed"
	o.Resume = &machine.Resume{State: st, Memory: plain, Disk: disk, MAC: opts.MAC}
	if m, err := machine.Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "not sealed") {
		if m != nil {
			m.Stop(context.Background())
		}
		t.Errorf("resuming on an unsealed memory file: %v", err)
	}
	for _, m := range ms {
		if err := m.Stop(context.Background()); err != nil {
			t.Errorf("stopping %s: %v", m.Name(), err)
		}
	}
	for f, b := range before {
		now, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if string(now) != string(b) {
			t.Errorf("%s changed while machines ran from it", filepath.Base(f))
		}
	}
}
