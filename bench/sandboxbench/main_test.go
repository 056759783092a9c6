package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/lang"
)

// guardedMapping maps size bytes of anonymous read-write memory between
// two inaccessible guard pages, as QEMU maps a RAM block, so that the
// kernel cannot merge it with a neighbouring mapping, and touches the
// first touched bytes of it.
func guardedMapping(t *testing.T, size, touched int) []byte {
	t.Helper()
	page := os.Getpagesize()
	all, err := syscall.Mmap(-1, 0, size+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(all) })
	for _, guard := range [][]byte{all[:page], all[page+size:]} {
		if err := syscall.Mprotect(guard, syscall.PROT_NONE); err != nil {
			t.Fatal(err)
		}
	}
	ram := all[page : page+size]
	for i := 0; i < touched; i += page {
		ram[i] = 1
	}
	return ram
}

// uintptrOf returns the address of b's first byte.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

func selfSmaps(t *testing.T) []mapping {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := vmbench.ParseSmaps(bytes.NewReader(b), "/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	return maps
}

// TestGuestRAMInThisProcess finds a RAM-like mapping of this process in
// its own smaps, and checks that its resident size counts the pages
// touched.
func TestGuestRAMInThisProcess(t *testing.T) {
	// An odd size, so that no other mapping of the test binary has it.
	page := os.Getpagesize()
	size, touched := 23<<20+3*page, 5<<20
	ram := guardedMapping(t, size, touched)
	maps := selfSmaps(t)
	m, err := vmbench.GuestRAM(maps, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	start := uint64(uintptrOf(ram))
	if m.Start != start || m.End != start+uint64(size) || m.Size != int64(size) || m.Path != "" || m.Perms != "rw-p" {
		t.Errorf("found %+v, want the mapping at %#x of %d bytes", m, start, size)
	}
	if m.Usage.Rss < int64(touched) || m.Usage.Rss > int64(size) || m.Usage.Pss != m.Usage.Rss {
		t.Errorf("Rss %d, Pss %d; want Rss between %d and %d and Pss equal to it (private pages)", m.Usage.Rss, m.Usage.Pss, touched, size)
	}
	if !slices.Contains(m.Flags, "rd") || !slices.Contains(m.Flags, "wr") {
		t.Errorf("VmFlags %v lack rd and wr", m.Flags)
	}
	// The guards are their own mappings, of one page each.
	var guards int
	for _, g := range maps {
		if (g.End == start || g.Start == m.End) && g.Perms == "---p" && g.Size == int64(page) {
			guards++
		}
	}
	if guards != 2 {
		t.Errorf("found %d guard pages around the mapping, want 2", guards)
	}
	if _, err := vmbench.GuestRAM(maps, int64(size+page)); err == nil {
		t.Error("a size no mapping has was found")
	}
}

// TestReadRollup checks that this process's resident size grows by what
// it touches.
func TestReadRollup(t *testing.T) {
	before, err := readRollup(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.Rss <= 0 || before.Pss <= 0 || before.Pss > before.Rss {
		t.Fatalf("Rss %d, Pss %d: want both positive and Pss at most Rss", before.Rss, before.Pss)
	}
	const touched = 32 << 20
	guardedMapping(t, touched, touched)
	after, err := readRollup(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.Rss - before.Rss; grew < touched*9/10 {
		t.Errorf("Rss grew by %d bytes after touching %d", grew, touched)
	}
	if _, err := readRollup(1 << 30); err == nil {
		t.Error("reading a process that does not exist succeeded")
	}
}

// qemuSmaps is the shape of a QEMU's smaps under TCG with 512 MiB of
// guest RAM, as read on this kind of host (other mappings left out).
const qemuSmaps = `55d0c4a00000-55d0c4b00000 r--p 00000000 fe:01 1234  /usr/bin/qemu-system-x86_64
Size:               1024 kB
Rss:                 900 kB
Pss:                 450 kB
VmFlags: rd mr mw me sd 
7fd770021000-7fd774000000 ---p 00000000 00:00 0 
Size:              65404 kB
Rss:                   0 kB
Pss:                   0 kB
VmFlags: mr mw me nr 
7fd777e00000-7fd797e00000 rw-p 00000000 00:00 0 
Size:             524288 kB
KernelPageSize:        4 kB
Rss:              131072 kB
Pss:              131072 kB
Anonymous:        131072 kB
THPeligible:    1
VmFlags: rd wr mr mw me dc ac hg mg 
7fd798000000-7fd7d7fff000 rwxp 00000000 00:00 0 
Size:            1048572 kB
Rss:                2048 kB
Pss:                2048 kB
VmFlags: rd wr ex mr mw me ac hg 
7fd7e0000000-7fd800000000 rw-p 00000000 00:00 0 
Size:             524288 kB
Rss:                1024 kB
Pss:                1024 kB
VmFlags: rd wr mr mw me ac 
7fd800000000-7fd800001000 rw-s 00000000 00:01 99  /memfd:my file (deleted)
Size:                  4 kB
Rss:                   4 kB
Pss:                   2 kB
VmFlags: rd wr sh mr mw me ms 
`

func TestParseSmapsAndPickGuestRAM(t *testing.T) {
	maps, err := vmbench.ParseSmaps(strings.NewReader(qemuSmaps), "smaps")
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 6 {
		t.Fatalf("parsed %d mappings, want 6", len(maps))
	}
	if maps[0].Path != "/usr/bin/qemu-system-x86_64" || maps[0].Usage != (memUsage{Rss: 900 << 10, Pss: 450 << 10}) {
		t.Errorf("first mapping %+v", maps[0])
	}
	if maps[5].Path != "/memfd:my file (deleted)" || maps[5].Perms != "rw-s" {
		t.Errorf("a path with spaces: %+v", maps[5])
	}
	// Two anonymous read-write mappings of 512 MiB: the one QEMU marked
	// (dc, mg) is the guest RAM; the executable TCG buffer never is.
	m, err := vmbench.GuestRAM(maps, 512<<20)
	if err != nil {
		t.Fatal(err)
	}
	if m.Start != 0x7fd777e00000 || m.Usage.Rss != 128<<20 {
		t.Errorf("picked %+v, want the mapping at 0x7fd777e00000 with 128 MiB resident", m)
	}
	if _, err := vmbench.GuestRAM(maps, 1048572<<10); err == nil {
		t.Error("the executable TCG buffer was taken for guest RAM")
	}
	if got, want := codeBuffer(maps), (memUsage{Rss: 2 << 20, Pss: 2 << 20}); got != want {
		t.Errorf("codeBuffer = %+v, want the executable mapping's %+v", got, want)
	}
	split := []mapping{
		{Perms: "rw-s", Path: "/memfd:tcg-jit (deleted)", Usage: memUsage{Rss: 3 << 20, Pss: 3 << 20}},
		{Perms: "r-xs", Path: "/memfd:tcg-jit (deleted)", Usage: memUsage{Rss: 3 << 20, Pss: 3 << 20}},
		{Perms: "r-xp", Path: "/usr/bin/qemu-system-x86_64", Usage: memUsage{Rss: 9 << 20, Pss: 1 << 20}},
	}
	if got, want := codeBuffer(split), (memUsage{Rss: 6 << 20, Pss: 6 << 20}); got != want {
		t.Errorf("codeBuffer of a split buffer = %+v, want %+v", got, want)
	}
	// Unmarked and ambiguous: an error, not a guess.
	unmarked := slices.Clone(maps)
	unmarked[2].Flags = []string{"rd", "wr"}
	if _, err := vmbench.GuestRAM(unmarked, 512<<20); err == nil {
		t.Error("two unmarked candidates gave an answer")
	}
	// A memory backend in a memfd qualifies by its name.
	memfd := []mapping{{Perms: "rw-s", Path: "/memfd:pc.ram (deleted)", Size: 512 << 20}}
	if _, err := vmbench.GuestRAM(memfd, 512<<20); err != nil {
		t.Errorf("a memfd pc.ram: %v", err)
	}

	for _, bad := range []string{
		"Size: 4 kB\n", // a field before any mapping
		"7fd800000000-7fd800001000 rw-p 00000000 00:00 0\nRss: lots\n",
		"7fd800000000-7fd800001000 rw-p 00000000 00:00 0\nnot a field\n",
	} {
		if _, err := vmbench.ParseSmaps(strings.NewReader(bad), "bad"); err == nil || !strings.Contains(err.Error(), "bad:") {
			t.Errorf("vmbench.ParseSmaps(%q) = %v, want an error naming the file and line", bad, err)
		}
	}
}

// TestBaselineMatchesSbxMachine checks that bare QEMU runs the machine
// package qemu gives sbx's sandboxes (machine type, accelerator, CPU,
// CPUs and memory) and boots the image's files without sbx's kernel
// parameters.
func TestBaselineMatchesSbxMachine(t *testing.T) {
	for _, accel := range []qemu.Accel{qemu.AccelTCG, qemu.AccelKVM} {
		for _, cpus := range []int{1, 2} {
			host := qemu.Host{OS: "linux", Arch: "amd64", Accels: []qemu.Accel{accel, qemu.AccelTCG},
				QEMU: map[string]qemu.Binary{"amd64": {Path: "/usr/bin/qemu-system-x86_64", Version: qemu.Version{Major: 7, Minor: 2}}}}
			b := &bench{
				host:     host,
				qemuPath: "/usr/bin/qemu-system-x86_64",
				sb:       &lang.Sandbox{Name: "box", CPUs: cpus},
				memory:   512 << 20,
				cmdline:  []string{"mitigations=off"},
				img: &image.Result{Outputs: map[string]image.Output{
					image.OutputKernel:    {Path: "/c/vmlinuz"},
					image.OutputInitramfs: {Path: "/c/initramfs"},
					image.OutputDisk:      {Path: "/c/disk,1.qcow2"},
				}},
			}
			got := b.baselineArgv()
			want, err := qemu.Command(qemu.VMSpec{
				Name: "box", Platform: lang.Platform{OS: "linux", Architecture: "amd64"},
				CPUs: cpus, MemoryBytes: b.memory, Kernel: "/c/vmlinuz", QMPSocket: "/s/qmp.sock",
			}, host)
			if err != nil {
				t.Fatal(err)
			}
			for _, opt := range []string{"-machine", "-accel", "-cpu", "-smp", "-m"} {
				if g, w := optionOf(got, opt), optionOf(want, opt); g != w || g == "" {
					t.Errorf("%s, %d CPUs: %s %q, sbx's machine has %q", accel, cpus, opt, g, w)
				}
			}
			for opt, v := range map[string]string{
				"-kernel": "/c/vmlinuz", "-initrd": "/c/initramfs", "-serial": "stdio",
				"-drive": "if=none,id=root,format=qcow2,snapshot=on,file=/c/disk,,1.qcow2",
			} {
				if g := optionOf(got, opt); g != v {
					t.Errorf("%s %q, want %q", opt, g, v)
				}
			}
			params := optionOf(got, "-append")
			if !strings.HasPrefix(params, "console=ttyS0 ") || !strings.Contains(params, " mitigations=off") || strings.Contains(params, "sbx.") {
				t.Errorf("-append %q: want the console, the image's parameters and none of sbx's", params)
			}
			if got[0] != "/usr/bin/qemu-system-x86_64" || !slices.Contains(got, "-nodefaults") {
				t.Errorf("argv %q", got)
			}
		}
	}
}

func optionOf(argv []string, name string) string {
	for i, a := range argv[:len(argv)-1] {
		if a == name {
			return argv[i+1]
		}
	}
	return ""
}

// TestProcesses checks alive against a running, a zombie and a reaped
// process, and that qemuProcesses finds an emulator by the paths in its
// arguments only.
func TestProcesses(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	// tail -f runs until killed, whatever its name, and keeps the file
	// named in its arguments open.
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "qemu-system-x86_64")
	b, err := os.ReadFile(tail)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "sbxb-marker")
	if err := os.Mkdir(marker, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(marker, "disk.qcow2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(fake, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	ours := start("-f", filepath.Join(marker, "disk.qcow2"))
	other := start("-f", os.DevNull)
	found := qemuProcesses(marker)
	if !slices.Contains(found, ours.Process.Pid) || slices.Contains(found, other.Process.Pid) {
		t.Errorf("qemuProcesses found %v; want %d and not %d", found, ours.Process.Pid, other.Process.Pid)
	}
	if got := qemuProcesses(filepath.Join(dir, "elsewhere")); len(got) != 0 {
		t.Errorf("qemuProcesses of an unused path found %v", got)
	}
	if !cmdlineHas(ours.Process.Pid, marker) || cmdlineHas(other.Process.Pid, marker) {
		t.Error("cmdlineHas does not tell the two processes apart")
	}

	// Killed but not waited for, it is a zombie: not alive.
	pid := ours.Process.Pid
	ours.Process.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive 10 s after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Errorf("the zombie %d should still be in /proc until reaped: %v", pid, err)
	}
	if slices.Contains(qemuProcesses(marker), pid) {
		t.Error("qemuProcesses lists a zombie")
	}
	ours.Wait()
	if alive(pid) {
		t.Errorf("process %d alive after it was reaped", pid)
	}
}

// TestReport checks the tables' ratios and means against samples whose
// answers are easy to work out.
func TestReport(t *testing.T) {
	s := vmbench.Of
	r := &results{
		n:    3,
		host: qemu.Host{Arch: "amd64", Accels: []qemu.Accel{qemu.AccelTCG}},
		qemu: qemu.Binary{Path: "/usr/bin/qemu-system-x86_64"}, cpus: 1, memory: 512 << 20,
		firstLines: s(1, 2, 4),
		readyLines: s(5, 6, 7),
		baseExits:  s(5.5, 6.5, 7.5),
		sbxRuns:    s(14, 10, 12),
		mem1: []memSample{{name: "box", supervisor: memUsage{Rss: 10 << 20, Pss: 8 << 20}, qemu: memUsage{Rss: 300 << 20, Pss: 290 << 20},
			guestRAM: memUsage{Rss: 200 << 20, Pss: 200 << 20}, code: memUsage{Rss: 50 << 20, Pss: 50 << 20}}},
		mem4: []memSample{
			{name: "a", supervisor: memUsage{Rss: 10 << 20, Pss: 4 << 20}, qemu: memUsage{Rss: 300 << 20, Pss: 280 << 20}, guestRAM: memUsage{Rss: 200 << 20, Pss: 200 << 20}},
			{name: "b", supervisor: memUsage{Rss: 12 << 20, Pss: 6 << 20}, qemu: memUsage{Rss: 320 << 20, Pss: 300 << 20}, guestRAM: memUsage{Rss: 200 << 20, Pss: 200 << 20}},
		},
	}
	var out strings.Builder
	r.print(&out)
	got := out.String()
	for _, want := range []string{
		"| bare QEMU: start → first console line | 1.00 s | 2.00 s | 6.00× | 10.00× |",
		"| bare QEMU: start → agent's ready line | 5.00 s | 6.00 s | 2.00× | 2.00× |",
		"| `sbx run DIR box -- true`: start → exit | 10.00 s | 12.00 s | 1.00× | 1.00× |",
		// 10 + (300 − 200) RSS, 8 + (290 − 200) PSS.
		"| 1 | box | 10.0 MiB | 8.0 MiB | 100.0 MiB | 90.0 MiB | 200.0 MiB | 110.0 MiB | 98.0 MiB |",
		"| 2 | **mean** | 11.0 MiB | 5.0 MiB | 110.0 MiB | 90.0 MiB | 200.0 MiB | 121.0 MiB | 95.0 MiB |",
		"50.0 MiB of 100.0 MiB",
		"- sbx run: 14.00 s, 10.00 s, 12.00 s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Exec of") {
		t.Errorf("the report has an exec table without exec samples:\n%s", got)
	}
}
