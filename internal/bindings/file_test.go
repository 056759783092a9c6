package bindings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const oneBinding = "binding \"token\" {\n  source = \"command:echo hi\"\n}\n"

// private returns a directory of this user's that no one else may
// write, under the test's temporary directory.
func private(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sbx")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := private(t)
	path := filepath.Join(dir, "bindings.hcl")
	write(t, path, oneBinding, 0o644)
	f, diags := Load(path, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !f.Exists || f.Path != path || len(f.Bindings) != 1 || f.Bindings[0].Source != "command:echo hi" {
		t.Errorf("Load = %+v", f)
	}
}

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(private(t), "bindings.hcl")
	f, diags := Load(path, Options{})
	if diags.HasErrors() || f.Exists || len(f.Bindings) != 0 || f.Path != path {
		t.Errorf("Load of a missing default file = %+v, %v; want no bindings", f, diags)
	}
	if _, diags := Load(path, Options{Required: true}); !diags.HasErrors() || !strings.Contains(diags.Error(), EnvFile) {
		t.Errorf("Load of a missing named file: %v, want an error naming %s", diags, EnvFile)
	}
}

// TestLoadRefusesFilesOthersControl: a bindings file says which commands
// run on the host, so one that another user could have written is
// refused: a symbolic link, a file owned by someone else, one group or
// others may write, one in a directory others may write to (they could
// rename a file of theirs over it), a named pipe.
func TestLoadRefusesFilesOthersControl(t *testing.T) {
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, path string)
		about string // what the error must say
	}{
		{"symbolic link", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), "real.hcl")
			write(t, target, oneBinding, 0o600)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"group-writable", func(t *testing.T, path string) {
			write(t, path, oneBinding, 0o664)
		}, "may be written by other users (mode 0664)"},
		{"other-writable", func(t *testing.T, path string) {
			write(t, path, oneBinding, 0o602)
		}, "may be written by other users (mode 0602)"},
		{"owned by another user", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file to another user")
			}
			write(t, path, oneBinding, 0o644)
			if err := os.Chown(path, 4321, 4321); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 4321, not by you"},
		{"directory others may write", func(t *testing.T, path string) {
			write(t, path, oneBinding, 0o600)
			if err := os.Chmod(filepath.Dir(path), 0o777); err != nil {
				t.Fatal(err)
			}
		}, "may be written by other users (mode 0777) and is not sticky"},
		{"directory of another user", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a directory to another user")
			}
			write(t, path, oneBinding, 0o600)
			if err := os.Chown(filepath.Dir(path), 4321, 4321); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 4321, neither you"},
		{"named pipe", func(t *testing.T, path string) {
			if err := mkfifo(path); err != nil {
				t.Skip(err)
			}
		}, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(private(t), "bindings.hcl")
			tc.make(t, path)
			f, diags := Load(path, Options{})
			if !diags.HasErrors() {
				t.Fatalf("Load accepted it: %+v", f)
			}
			if f != nil {
				t.Errorf("Load returned bindings with its error: %+v", f)
			}
			var unsafe *UnsafeError
			if !errors.As(diags[0].Extra.(error), &unsafe) {
				t.Errorf("the error is not an *UnsafeError: %v", diags)
			}
			if msg := diags.Error(); !strings.Contains(msg, tc.about) || !strings.Contains(msg, "Bindings file refused") {
				t.Errorf("error %q does not say %q", msg, tc.about)
			}
		})
	}
}

// TestLoadThroughLinkedDirectory: a directory above the file may be a
// symbolic link (dotfiles are often linked), if what it resolves to
// passes the checks too.
func TestLoadThroughLinkedDirectory(t *testing.T) {
	real := private(t)
	write(t, filepath.Join(real, "bindings.hcl"), oneBinding, 0o600)
	link := filepath.Join(t.TempDir(), "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, diags := Load(filepath.Join(link, "bindings.hcl"), Options{}); diags.HasErrors() {
		t.Errorf("Load through a linked directory: %v", diags)
	}
	if err := os.Chmod(real, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, diags := Load(filepath.Join(link, "bindings.hcl"), Options{}); !diags.HasErrors() {
		t.Error("Load through a link to a directory others may write accepted it")
	}
}

func TestFind(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "sbx")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "bindings.hcl"), "binding \"t\" {\n  source = \"file:~/t\"\n}\n", 0o600)
	f, diags := Find([]string{"HOME=" + home})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(f.Bindings) != 1 || f.Bindings[0].resolve != "file:"+filepath.Join(home, "t") {
		t.Errorf("Find = %+v; want the binding, ~ being environ's HOME", f.Bindings)
	}
	other := filepath.Join(private(t), "b.hcl")
	if _, diags := Find([]string{"HOME=" + home, "SBX_BINDINGS=" + other}); !diags.HasErrors() {
		t.Error("Find of a missing file SBX_BINDINGS names is not an error")
	}
}
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
