package supervisor

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/consolelog"
)

// sparseFile makes a file of n bytes that takes no disk, ending "the end\n".
func sparseFile(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("the end\n"), n-8); err != nil {
		t.Fatal(err)
	}
}

// TestSaveConsoleKeepsTheEnd: the console a killed supervisor's machine
// left, 100 MiB of it (a sparse file standing for a log that grew
// unbounded), is kept by its end only, at most the cap, in bounded
// memory; the rotated file beside it is kept too.
func TestSaveConsoleKeepsTheEnd(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "sbx-1234")
	if err := os.Mkdir(mdir, 0o700); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(mdir, machine.ConsoleFile)
	sparseFile(t, live, 100<<20)
	os.WriteFile(consolelog.Rotated(live), []byte("before\n"), 0o600)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	saveConsole(dir)
	runtime.ReadMemStats(&after)

	kept := filepath.Join(dir, ConsoleFile)
	fi, err := os.Stat(kept)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != consolelog.DefaultMax {
		t.Errorf("kept a console of %d bytes, want the cap, %d", fi.Size(), consolelog.DefaultMax)
	}
	if b, _ := consolelog.Tail(kept, 8); string(b) != "the end\n" {
		t.Errorf("the kept console ends %q", b)
	}
	if b, _ := os.ReadFile(consolelog.Rotated(kept)); string(b) != "before\n" {
		t.Errorf("the kept rotated console holds %q", b)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("keeping the console allocated %d bytes", n)
	}
}

// TestSaveConsoleOnlyFromItsMachines: a status file naming a machine
// directory elsewhere does not make saveConsole take (or read) a console
// from there.
func TestSaveConsoleOnlyFromItsMachines(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	victim := filepath.Join(other, "sbx-1", machine.ConsoleFile)
	os.Mkdir(filepath.Dir(victim), 0o700)
	os.WriteFile(victim, []byte("not the sandbox's\n"), 0o600)
	if err := writeStatus(dir, Status{Name: "box", State: StateStopped, MachineDir: filepath.Dir(victim)}); err != nil {
		t.Fatal(err)
	}
	// A machine directory that is a link to the other one is not taken
	// either.
	os.Symlink(filepath.Dir(victim), filepath.Join(dir, "sbx-2"))
	saveConsole(dir)
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not the sandbox's\n" {
		t.Errorf("the console outside the sandbox's directory was moved or changed: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ConsoleFile)); err == nil {
		t.Error("a console from outside the sandbox's directory was kept as its own")
	}
	if p, live := ConsolePath(dir); live || p != filepath.Join(dir, ConsoleFile) {
		t.Errorf("ConsolePath = %s, %v; want the kept console's path", p, live)
	}
}
