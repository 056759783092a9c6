package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saveN saves sample() n times under a new lease and returns the state
// file's bytes after each save.
func saveN(t *testing.T, dir string, n int) [][]byte {
	t.Helper()
	l := lock(t, dir)
	defer l.Close()
	s := sample()
	var files [][]byte
	for range n {
		if err := l.Save(s); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
	}
	return files
}

func TestSaveKeepsBackupOfPreviousState(t *testing.T) {
	dir := t.TempDir()
	files := saveN(t, dir, 3)
	backup := filepath.Join(dir, Dir, BackupFileName)
	got, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(files[1]) {
		t.Errorf("the backup holds:\n%s\nwant the state before the last save:\n%s", got, files[1])
	}
	prev, err := parse(got, backup)
	if err != nil || prev.Serial != 2 {
		t.Errorf("the backup is %+v, %v; want a state of serial 2", prev, err)
	}
	if fi, err := os.Lstat(backup); err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
		t.Errorf("backup: %v, %v; want a regular file of mode 0600", fi, err)
	}
}

func TestSaveBackupReplacesPlantedLink(t *testing.T) {
	dir, sbx := checkout(t)
	l := lock(t, dir)
	defer l.Close()
	s := sample()
	if err := l.Save(s); err != nil {
		t.Fatal(err)
	}
	v := victim(t, bashrc)
	backup := filepath.Join(sbx, BackupFileName)
	if err := os.Symlink(v, backup); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(s); err != nil {
		t.Fatal(err)
	}
	assertContent(t, v, bashrc)
	if fi, err := os.Lstat(backup); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("backup after save: %v, %v; want the link replaced by a regular file", fi, err)
	}
}

func TestCorruptStateSaysHowToRecover(t *testing.T) {
	dir := t.TempDir()
	saveN(t, dir, 2)
	if err := os.WriteFile(Path(dir), []byte("{\n  \"format_version\": 1,\n<<<<<<< HEAD\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, Dir, BackupFileName)
	for what, load := range map[string]func() error{
		"Load": func() error { _, err := Load(dir); return err },
		"Lease.Load": func() error {
			l := lock(t, dir)
			defer l.Close()
			_, err := l.Load()
			return err
		},
	} {
		err := load()
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("%s of a corrupt state: %v; want a *CorruptError", what, err)
		}
		if ce.Backup != backup || ce.BackupSerial != 1 {
			t.Errorf("%s: backup %q serial %d; want %s, serial 1", what, ce.Backup, ce.BackupSerial, backup)
		}
		for _, want := range []string{Path(dir) + ":3:1 is not valid", "(serial 1) is in " + backup, "cp " + backup + " " + Path(dir), `"sbx destroy -orphans ` + dir + `"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", what, err, want)
			}
		}
	}
}

func TestCorruptStateWithoutBackup(t *testing.T) {
	dir, sbx := checkout(t)
	if err := os.WriteFile(Path(dir), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A backup that is a link to a valid state elsewhere is not one.
	elsewhere := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(elsewhere, goldenState(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(sbx, BackupFileName)); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Backup != "" {
		t.Fatalf("Load: %v; want a *CorruptError with no backup", err)
	}
	for _, want := range []string{"no valid backup", `"sbx destroy -orphans ` + dir + `"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// A state of another format version is not corrupt.
	if err := os.WriteFile(Path(dir), []byte(`{"format_version": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || errors.As(err, &ce) {
		t.Errorf("Load of a state of another version: %v; want an error that is not a *CorruptError", err)
	}
}

func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"/home/u/proj":   "/home/u/proj",
		".":              ".",
		"/tmp/my proj":   "'/tmp/my proj'",
		"/tmp/it's":      `'/tmp/it'\''s'`,
		"/tmp/$(reboot)": "'/tmp/$(reboot)'",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
