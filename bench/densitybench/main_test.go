//go:build linux

package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/sbx-dev/sbx/bench/internal/vmbench"
)

// smapsFixture is a QEMU's smaps cut down: its binary (a clean text
// mapping and a written data mapping), the guest RAM of 1 GiB, the TCG
// buffer, a heap and a library.
const smapsFixture = `55d0c0000000-55d0c0500000 r-xp 00000000 08:01 1234   /usr/bin/qemu-system-x86_64
Size:               5120 kB
Rss:                4000 kB
Pss:                2000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
55d0c0600000-55d0c0700000 rw-p 00500000 08:01 1234   /usr/bin/qemu-system-x86_64
Size:               1024 kB
Rss:                1000 kB
Pss:                1000 kB
Anonymous:           600 kB
VmFlags: rd wr mr mw me ac
55d0c1000000-55d0c1600000 rw-p 00000000 00:00 0      [heap]
Size:               6144 kB
Rss:                5000 kB
Pss:                5000 kB
Anonymous:          5000 kB
VmFlags: rd wr mr mw me ac
7f0000000000-7f0040000000 rw-p 00000000 00:00 0 
Size:            1048576 kB
Rss:              153600 kB
Pss:              153600 kB
Anonymous:        153600 kB
VmFlags: rd wr mr mw me ac dc mg hg
7f0040000000-7f0042000000 rwxp 00000000 00:00 0 
Size:              32768 kB
Rss:               32768 kB
Pss:               32768 kB
Anonymous:         32768 kB
VmFlags: rd wr ex mr mw me ac
7f0050000000-7f0050100000 r--p 00000000 08:01 99     /usr/lib/x86_64-linux-gnu/lib with space.so
Size:               1024 kB
Rss:                 800 kB
Pss:                 400 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
`

func TestSummarize(t *testing.T) {
	maps, err := vmbench.ParseSmaps(strings.NewReader(smapsFixture), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 6 || maps[5].Path != "/usr/lib/x86_64-linux-gnu/lib with space.so" {
		t.Fatalf("parsed %d mappings, the last at %q", len(maps), maps[len(maps)-1].Path)
	}
	q, err := summarize(maps, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	const kb = 1 << 10
	if q.RAM != (usage{Rss: 153600 * kb, Pss: 153600 * kb, Anon: 153600 * kb}) {
		t.Errorf("guest RAM %+v", q.RAM)
	}
	if q.Code.Anon != 32768*kb {
		t.Errorf("TCG buffer %d", q.Code.Anon)
	}
	// Overhead: the written data pages, the heap and the TCG buffer.
	if want := int64(600+5000+32768) * kb; q.Overhead() != want {
		t.Errorf("Overhead = %d KiB, want %d", q.Overhead()/kb, want/kb)
	}
	// RSS beyond the guest RAM also counts the clean file pages.
	if want := int64(4000+1000+5000+32768+800) * kb; q.Beyond().Rss != want {
		t.Errorf("RSS beyond RAM = %d KiB, want %d", q.Beyond().Rss/kb, want/kb)
	}
	if want := int64(4000+400+800) * kb; q.SharedFile() != want {
		t.Errorf("SharedFile = %d KiB, want %d", q.SharedFile()/kb, want/kb)
	}

	// A guest of another size has no RAM mapping here.
	if _, err := summarize(maps, 512<<20); err == nil {
		t.Error("found guest RAM of 512 MiB in a QEMU of 1 GiB")
	}
}

func TestParseSmapsRejects(t *testing.T) {
	for _, bad := range []string{
		"",
		"Rss: 4 kB\n",
		strings.Replace(smapsFixture, "Rss:                5000 kB", "Rss: 5000 MB", 1),
		strings.Replace(smapsFixture, "Anonymous:          5000 kB", "Anonymous: -5 kB", 1),
	} {
		if _, err := vmbench.ParseSmaps(strings.NewReader(bad), "bad"); err == nil {
			t.Errorf("parseSmaps accepted %.40q…", bad)
		}
	}
}

// TestGuestRAMInThisProcess maps 64 MiB between guard pages, as QEMU maps
// guest RAM, touches 8 MiB of it and finds it in this process's smaps.
func TestGuestRAMInThisProcess(t *testing.T) {
	const size, touched = 64 << 20, 8 << 20
	page := os.Getpagesize()
	all, err := syscall.Mmap(-1, 0, size+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(all)
	for _, guard := range [][]byte{all[:page], all[page+size:]} {
		if err := syscall.Mprotect(guard, syscall.PROT_NONE); err != nil {
			t.Fatal(err)
		}
	}
	ram := all[page : page+size]
	// No huge pages, so that what is resident is what was touched.
	if err := syscall.Madvise(ram, 15); err != nil { // MADV_NOHUGEPAGE
		t.Fatal(err)
	}
	for i := 0; i < touched; i += page {
		ram[i] = 1
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := vmbench.ParseSmaps(bytes.NewReader(b), "/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vmbench.GuestRAM(maps, size)
	if err != nil {
		t.Fatal(err)
	}
	if m.Start != uint64(uintptr(unsafe.Pointer(&ram[0]))) {
		t.Errorf("found a mapping at %#x, want %p", m.Start, &ram[0])
	}
	if m.Usage.Rss != touched || m.Usage.Anon != touched {
		t.Errorf("resident %d, anonymous %d; want %d each", m.Usage.Rss, m.Usage.Anon, touched)
	}
}

func TestProcFiles(t *testing.T) {
	u, err := parseRollup([]byte("55d0c0000000-7ffd0000000 ---p 00000000 00:00 0  [rollup]\nRss: 100 kB\nPss: 50 kB\nPss_Anon: 10 kB\nAnonymous: 30 kB\n"), "rollup")
	if err != nil || u != (usage{Rss: 100 << 10, Pss: 50 << 10, Anon: 30 << 10}) {
		t.Errorf("parseRollup = %+v, %v", u, err)
	}
	if _, err := parseRollup([]byte("Rss: 100 kB\nPss: 50 kB\n"), "rollup"); err == nil {
		t.Error("parseRollup accepted a rollup without Anonymous")
	}
	if n, err := parseMemAvailable([]byte("MemTotal: 24683620 kB\nMemFree: 1 kB\nMemAvailable: 2048 kB\n")); err != nil || n != 2<<20 {
		t.Errorf("parseMemAvailable = %d, %v", n, err)
	}
	if _, err := parseMemAvailable([]byte("MemTotal: 1 kB\n")); err == nil {
		t.Error("parseMemAvailable accepted a meminfo without MemAvailable")
	}
	stat := "4242 (qemu (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0"
	if c, err := parseCPUTime([]byte(stat)); err != nil || c != 3 {
		t.Errorf("parseCPUTime = %v, %v; want 3 s", c, err)
	}
	if _, err := parseCPUTime([]byte("4242 (qemu) S 1 2")); err == nil {
		t.Error("parseCPUTime accepted a short line")
	}
	// This process has used some CPU and is alive.
	if _, err := cpuTime(os.Getpid()); err != nil || !alive(os.Getpid()) {
		t.Errorf("cpuTime(self): %v; alive %v", err, alive(os.Getpid()))
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{"-n", "0"}, {"-memory", "64"}, {"-parallel", "0"}, {"-buffers", "16,x"}, {"extra"}} {
		out.Reset()
		errOut.Reset()
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
			t.Errorf("run(%q) = %d, %q; want 2 and the usage", args, code, errOut.String())
		}
	}
}

func TestReportWithoutCount(t *testing.T) {
	q := func(overhead int64) qemuMemory {
		return qemuMemory{Total: usage{Rss: 300 << 20, Pss: 250 << 20, Anon: 150<<20 + overhead}, RAM: usage{Rss: 150 << 20, Pss: 150 << 20, Anon: 150 << 20}, Code: usage{Rss: 16 << 20, Pss: 16 << 20, Anon: 16 << 20}}
	}
	c := config{memory: 1 << 30, idle: 1, buffers: []int{32}}
	r := &results{config: c, variants: c.variants(), samples: [][]sample{
		{{idle: q(90 << 20), worked: q(100 << 20)}},
		{{idle: q(40 << 20), worked: q(40 << 20)}},
		{{idle: q(56 << 20), worked: q(56 << 20)}},
	}}
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"| host memory of one idle sandbox's QEMU (medians) | old | new | new, 32 MiB buffer | new ÷ old |",
		"| **overhead**: anonymous memory beyond the guest RAM, idle after boot | 90.0 MiB | 40.0 MiB | 56.0 MiB | 0.44× |",
		"old 1: overhead 90.0", "new, 32 MiB buffer 1: overhead 56.0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
