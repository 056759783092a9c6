//go:build unix

package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests play an untrusted checkout: .sbx and the files in it are
// written by whoever wrote the repository, and sbx runs on it.

// victim writes a file outside the configuration directory holding
// content, standing for the user's own files (~/.bashrc) or secrets.
func victim(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func assertContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s was changed: it holds %q, want %q", path, got, want)
	}
}

// checkout makes a configuration directory with .sbx and returns both.
func checkout(t *testing.T) (dir, sbx string) {
	t.Helper()
	dir = t.TempDir()
	sbx = filepath.Join(dir, Dir)
	if err := os.Mkdir(sbx, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, sbx
}

const bashrc = "export PATH=$HOME/bin:$PATH\nalias ll='ls -l'\n"

func TestLockDoesNotFollowSymlinkedLockFile(t *testing.T) {
	dir, sbx := checkout(t)
	v := victim(t, bashrc)
	if err := os.Symlink(v, filepath.Join(sbx, LockFileName)); err != nil {
		t.Fatal(err)
	}
	l, err := Lock(context.Background(), dir)
	if err == nil {
		l.Close()
		t.Error("Lock took a lock file that is a symbolic link")
	} else if want := filepath.Join(sbx, LockFileName) + " is a symbolic link"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	assertContent(t, v, bashrc)
}

func TestLockDoesNotClobberHardLinkedLockFile(t *testing.T) {
	dir, sbx := checkout(t)
	v := victim(t, bashrc)
	if err := os.Link(v, filepath.Join(sbx, LockFileName)); err != nil {
		t.Skipf("cannot make a hard link across temporary directories: %v", err)
	}
	l := lock(t, dir)
	// It still locks.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if second, err := Lock(ctx, dir); err == nil {
		second.Close()
		t.Error("a second Lock succeeded while the first was held")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertContent(t, v, bashrc)
}

func TestLockRecordsHolderInOwnLockFileOnly(t *testing.T) {
	dir, sbx := checkout(t)
	path := filepath.Join(sbx, LockFileName)
	// A lock file left by an sbx that crashed holds a process id: it is
	// overwritten in place.
	if err := os.WriteFile(path, []byte("123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := lock(t, dir)
	if pid := readHolderFile(t, path); pid != os.Getpid() {
		t.Errorf("lock file records pid %d, want %d", pid, os.Getpid())
	}
	l.Close()
	if pid := readHolderFile(t, path); pid != 0 {
		t.Errorf("released lock file still records pid %d", pid)
	}
}

func readHolderFile(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readHolder(f)
}

func TestLockRefusesSymlinkedStateDir(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, Dir)); err != nil {
		t.Fatal(err)
	}
	l, err := Lock(context.Background(), dir)
	if err == nil {
		l.Close()
		t.Error("Lock used a .sbx that is a symbolic link")
	} else if want := filepath.Join(dir, Dir) + " is a symbolic link"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	assertOnly(t, elsewhere)
}

func TestLoadRefusesSymlinkedStateDir(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, FileName), goldenState(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, Dir)); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err == nil {
		t.Fatalf("Load read state through a symbolic link: %d resources", len(s.Resources))
	}
	if want := filepath.Join(dir, Dir) + " is a symbolic link"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestStateDirNotADirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Dir), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, Dir) + " is not a directory"
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load: %v; want an error saying %q", err, want)
	}
	if l, err := Lock(context.Background(), dir); err == nil {
		l.Close()
		t.Errorf("Lock succeeded with .sbx a regular file")
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("Lock: %v; want an error saying %q", err, want)
	}
}

// secretState is a file outside the checkout that an error message could
// quote: its lineage is not a UUID, and a parse error quotes the lineage.
const secretState = `{"format_version": 1, "lineage": "ghp_SECRETTOKEN0123456789"}`

func TestLoadRefusesSymlinkedStateFile(t *testing.T) {
	dir, sbx := checkout(t)
	v := victim(t, secretState)
	if err := os.Symlink(v, filepath.Join(sbx, FileName)); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("Load read a state file that is a symbolic link")
	}
	if strings.Contains(err.Error(), "SECRETTOKEN") {
		t.Errorf("the error quotes the link's target: %v", err)
	}
	if want := Path(dir) + " is a symbolic link"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}

	// Nor under a lease, and Save does not replace it.
	l := lock(t, dir)
	if _, err := l.Load(); err == nil || strings.Contains(err.Error(), "SECRETTOKEN") {
		t.Errorf("Lease.Load: %v", err)
	}
	if err := l.Save(sample()); err == nil {
		t.Error("Save replaced a state file that is a symbolic link")
	}
	assertContent(t, v, secretState)
}

func TestLoadRefusesStateFileFIFO(t *testing.T) {
	dir, sbx := checkout(t)
	if err := syscall.Mkfifo(filepath.Join(sbx, FileName), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if want := Path(dir) + " is not a regular file"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load: %v; want an error saying %q", err, want)
		}
	case <-time.After(30 * time.Second):
		// Unblock the reader so the test binary can exit.
		if f, err := os.OpenFile(filepath.Join(sbx, FileName), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Load blocked opening a named pipe")
	}
}

func TestSaveDoesNotFollowPlantedLinks(t *testing.T) {
	dir, sbx := checkout(t)
	l := lock(t, dir)
	if err := l.Save(sample()); err != nil {
		t.Fatal(err)
	}
	// Replace the state file by a link to a victim between two saves: the
	// next Load refuses it; the victim is untouched.
	v := victim(t, bashrc)
	if err := os.Remove(filepath.Join(sbx, FileName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(v, filepath.Join(sbx, FileName)); err != nil {
		t.Fatal(err)
	}
	s := sample()
	if err := l.Save(s); err == nil {
		t.Error("Save wrote over a symbolic link")
	}
	assertContent(t, v, bashrc)
}

// goldenState returns the bytes of a valid state file.
func goldenState(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", FileName))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLockRefusesLockFileFIFO(t *testing.T) {
	dir, sbx := checkout(t)
	path := filepath.Join(sbx, LockFileName)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	l, err := Lock(context.Background(), dir)
	if err == nil {
		l.Close()
		t.Fatal("Lock took a named pipe as its lock file")
	}
	if want := path + " is not a regular file"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestLockDoesNotWriteHardLinkedEmptyFile(t *testing.T) {
	dir, sbx := checkout(t)
	v := victim(t, "")
	if err := os.Link(v, filepath.Join(sbx, LockFileName)); err != nil {
		t.Skipf("cannot make a hard link across temporary directories: %v", err)
	}
	l := lock(t, dir)
	assertContent(t, v, "")
	l.Close()
	assertContent(t, v, "")
}
