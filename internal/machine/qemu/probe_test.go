//go:build linux

package qemu

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

// requireQEMU returns the x86 emulator's path; see qemutest.Require for
// what happens when the host has none.
func requireQEMU(t *testing.T) string {
	t.Helper()
	return qemutest.Require(t)
}

// TestProbe probes this machine for real. Here /dev/kvm exists but cannot
// run guests, so the verdict must be TCG with a note about KVM, and the
// probe must respect its time limit.
func TestProbe(t *testing.T) {
	qemu := requireQEMU(t)
	p := Prober{CacheDir: t.TempDir(), Timeout: 3 * time.Second}
	start := time.Now()
	h, err := p.Probe(context.Background())
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probe took %v: %+v", elapsed.Round(time.Millisecond), h)
	if elapsed > p.Timeout+5*time.Second {
		t.Errorf("probe took %v with a %v limit on its test guest", elapsed, p.Timeout)
	}
	if h.OS != runtime.GOOS || h.Arch != runtime.GOARCH {
		t.Errorf("host %s/%s, running on %s/%s", h.OS, h.Arch, runtime.GOOS, runtime.GOARCH)
	}
	b, ok := h.QEMU["amd64"]
	if !ok {
		t.Fatalf("probe did not find qemu-system-x86_64 (which is %s)", qemu)
	}
	out, err := exec.Command(qemu, "-version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "version "+b.Version.String()) {
		t.Errorf("probed version %s; -version says %q", b.Version, out)
	}
	if len(h.Accels) == 0 || h.Accels[len(h.Accels)-1] != AccelTCG {
		t.Errorf("accels %v do not end with TCG", h.Accels)
	}
	if h.Cached {
		t.Error("first probe with an empty cache reports a cached verdict")
	}
	if runtime.GOARCH != "amd64" {
		return
	}
	hasFlags, _ := cpuHasVirtualization("/proc/cpuinfo")
	if _, err := os.Stat(kvmDevice); err == nil && !hasFlags {
		// This kind of machine: KVM must be refused, and said so.
		if h.Accel("amd64") != AccelTCG {
			t.Errorf("chose %s on a host whose CPU has no vmx/svm", h.Accel("amd64"))
		}
		if !strings.Contains(h.Note, "KVM") || !strings.Contains(h.Note, "TCG") {
			t.Errorf("note %q does not say KVM was refused for TCG", h.Note)
		}
	}
	if _, err := os.Stat(kvmDevice); err == nil && h.Accel("amd64") == AccelTCG && !strings.Contains(h.Note, "KVM") {
		t.Errorf("/dev/kvm exists and TCG was chosen, but the note %q does not say why KVM was not", h.Note)
	}
}

// The second probe in the same boot reads the verdict back; a verdict
// for another boot or QEMU version is not used.
func TestProbeCache(t *testing.T) {
	requireQEMU(t)
	if _, err := bootID(); err != nil {
		t.Fatalf("this Linux host has no boot id: %v", err)
	}
	dir := t.TempDir()
	p := Prober{CacheDir: dir}
	first, err := p.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "accel-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one verdict", files)
	}
	second, err := p.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || second.Note != first.Note || strings.Join(accelNames(second.Accels), ",") != strings.Join(accelNames(first.Accels), ",") {
		t.Errorf("second probe %+v, first %+v", second, first)
	}

	// Rewrite the verdict as if from another boot: it must be ignored
	// (and replaced).
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var v verdict
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	v.BootID = "00000000-0000-0000-0000-000000000000"
	v.Note = "stale"
	data, _ = json.Marshal(v)
	if err := os.WriteFile(files[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := p.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if third.Cached || third.Note == "stale" {
		t.Errorf("a verdict from another boot was used: %+v", third)
	}

	// NoCache neither reads nor writes.
	empty := t.TempDir()
	h, err := Prober{CacheDir: empty, NoCache: true}.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Cached {
		t.Error("NoCache probe reports a cached verdict")
	}
	if files, _ := os.ReadDir(empty); len(files) != 0 {
		t.Errorf("NoCache probe wrote %d files", len(files))
	}
}

func accelNames(a []Accel) []string {
	var s []string
	for _, x := range a {
		s = append(s, string(x))
	}
	return s
}

func TestProbeNoEmulator(t *testing.T) {
	_, err := Prober{Path: t.TempDir(), NoCache: true}.Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "qemu-system-x86_64") {
		t.Errorf("err = %v, want one naming the emulators looked for", err)
	}
	if want := "; install QEMU with: " + InstallCommand(runtime.GOOS); InstallCommand(runtime.GOOS) != "" && !strings.HasSuffix(err.Error(), want) {
		t.Errorf("err = %v, want it to end with %q", err, want)
	}
}

func TestInstallCommand(t *testing.T) {
	for goos, want := range map[string]string{
		"linux":   "apt-get install qemu-system-x86 qemu-utils (Debian, Ubuntu) or dnf install qemu-kvm qemu-img (Fedora)",
		"darwin":  "brew install qemu",
		"windows": "",
	} {
		if got := InstallCommand(goos); got != want {
			t.Errorf("InstallCommand(%q) = %q, want %q", goos, got, want)
		}
	}
}

// The test guest runs to its end under TCG: this proves the guest and the
// way the probe reads its progress, which KVM verdicts rely on.
func TestAccelProbeGuestUnderTCG(t *testing.T) {
	qemu := requireQEMU(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("SKIPPING: the x86 test guest runs on amd64 hosts; this is %s", runtime.GOARCH)
	}
	r := runAccelProbe(context.Background(), qemu, AccelTCG, 20*time.Second)
	if !r.OK {
		t.Fatalf("the test guest failed under TCG: %s", r.Detail)
	}
	t.Logf("TCG ran the test guest in %v", r.Elapsed.Round(time.Millisecond))
}

// A guest that cannot finish in time is reported as such, QEMU is killed
// and the call returns promptly.
func TestAccelProbeTimeout(t *testing.T) {
	qemu := requireQEMU(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("SKIPPING: the x86 test guest runs on amd64 hosts; this is %s", runtime.GOARCH)
	}
	start := time.Now()
	r := runAccelProbe(context.Background(), qemu, AccelTCG, 5*time.Millisecond)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("probe with a 5ms limit returned after %v", d)
	}
	if r.OK {
		t.Fatal("the test guest finished within 5ms, QEMU start included; the limit is not applied")
	}
	if !strings.Contains(r.Detail, "made no progress to its end in 5ms under TCG") {
		t.Errorf("detail = %q", r.Detail)
	}
	if leftover := processesRunning(t, "sbx-accel-probe-"); len(leftover) > 0 {
		t.Errorf("QEMU processes left running: %v", leftover)
	}
}

// On this machine KVM is there but does not run guests: the test guest
// must not pass under it, and the probe must stay within its limit.
func TestAccelProbeKVMHere(t *testing.T) {
	qemu := requireQEMU(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("SKIPPING: the x86 test guest runs on amd64 hosts; this is %s", runtime.GOARCH)
	}
	f, err := os.OpenFile(kvmDevice, os.O_RDWR, 0)
	if err != nil {
		t.Skipf("SKIPPING: %s does not open read-write here (%v); the KVM refusal is covered by TestProbe", kvmDevice, err)
	}
	f.Close()
	hasFlags, err := cpuHasVirtualization("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 3 * time.Second
	start := time.Now()
	r := runAccelProbe(context.Background(), qemu, AccelKVM, limit)
	elapsed := time.Since(start)
	t.Logf("KVM probe: ok=%v in %v: %s", r.OK, elapsed.Round(time.Millisecond), r.Detail)
	if elapsed > limit+3*time.Second {
		t.Errorf("KVM probe took %v with a %v limit", elapsed, limit)
	}
	if !hasFlags && r.OK {
		t.Errorf("the test guest passed under KVM on a CPU without vmx/svm")
	}
	if !r.OK && !strings.Contains(r.Detail, "KVM") {
		t.Errorf("detail %q does not name KVM", r.Detail)
	}
}

func TestGuestProgress(t *testing.T) {
	for con, want := range map[string]string{
		"":                                   "not even the firmware ran",
		"SeaBIOS (version 1.16)\nBooting\n":  "the firmware ran but the guest did not start",
		"SeaBIOS\nBooting from c000:003c\nP": "it reached 32-bit mode and stalled there",
		"SeaBIOS\nBooting\nPL":               "it reached 64-bit mode and stalled there",
		"SeaBIOS\nBooting\nPLD\n":            "it finished",
	} {
		if got := guestProgress([]byte(con)); got != want {
			t.Errorf("guestProgress(%q) = %q, want %q", con, got, want)
		}
	}
}

func TestCPUHasVirtualization(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		cpuinfo string
		want    bool
		err     bool
	}{
		"intel":                {"processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae vmx smx est\n", true, false},
		"amd":                  {"processor\t: 0\nflags\t\t: fpu svm extapic\n", true, false},
		"none":                 {"processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n", false, false},
		"vmx in another field": {"processor\t: 0\nvmx flags\t: vnmi preemption_timer\nflags\t\t: fpu hypervisor\n", false, false},
		"no flags line":        {"processor\t: 0\n", false, true},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(tc.cpuinfo), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := cpuHasVirtualization(path)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: got %v, %v; want %v, error %v", name, got, err, tc.want, tc.err)
		}
	}
}

func TestHasOption(t *testing.T) {
	help := "-sandbox on[,obsolete=allow|deny]\n                Enable seccomp mode 2\n-name string1\n"
	if !hasOption(help, "-sandbox") || !hasOption(help, "-name") || hasOption(help, "-seccomp") {
		t.Error("hasOption misreads -help output")
	}
	if hasOption("                Enable -sandbox mode\n", "-sandbox") {
		t.Error("hasOption matched an option named in a description")
	}
}

// The bytes the probe boots are the assembled testdata/kvmprobe.S.
func TestKVMProbeGuestMatchesSource(t *testing.T) {
	as, err1 := exec.LookPath("as")
	ld, err2 := exec.LookPath("ld")
	if err1 != nil || err2 != nil || runtime.GOARCH != "amd64" {
		t.Skip("SKIPPING: needs the GNU assembler and linker for x86-64 (Debian package binutils) on an amd64 host")
	}
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "kvmprobe.o"), filepath.Join(dir, "kvmprobe.bin")
	if out, err := exec.Command(as, "--64", "-o", obj, "testdata/kvmprobe.S").CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(ld, "-m", "elf_x86_64", "-Ttext=0x100000", "--oformat", "binary", "-o", bin, obj).CombinedOutput(); err != nil {
		t.Fatalf("ld: %v\n%s", err, out)
	}
	got, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(kvmProbeGuest) {
		t.Errorf("kvmProbeGuest (%d bytes) differs from testdata/kvmprobe.S assembled (%d bytes)", len(kvmProbeGuest), len(got))
	}
}

// processesRunning lists the pids of processes whose command line
// contains s.
func processesRunning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		if state, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(state), ") Z ") {
			continue // a zombie another test has not reaped yet
		}
		pids = append(pids, e.Name())
	}
	return pids
}
