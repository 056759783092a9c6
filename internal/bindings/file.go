package bindings

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/hostenv"
)

// EnvFile is the environment variable that names the bindings file in
// place of the default.
const EnvFile = "SBX_BINDINGS"

// maxFile bounds the bindings file: it holds a few lines per secret.
const maxFile = 1 << 20

// Path returns the bindings file's path for the environment environ (as
// os.Environ gives it; nil means this process's): $SBX_BINDINGS, else
// bindings.hcl in the sbx directory of $XDG_CONFIG_HOME when that is
// absolute, else ~/.config/sbx/bindings.hcl. named reports that
// SBX_BINDINGS named it. Home is the home directory environ names
// (HOME), which "~/" stands for in the file.
func Path(environ []string) (path, home string, named bool, err error) {
	if environ == nil {
		environ = os.Environ()
	}
	home = hostenv.Get(environ, "HOME")
	if !filepath.IsAbs(home) {
		home = ""
	}
	if p := hostenv.Get(environ, EnvFile); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", home, true, fmt.Errorf("%s=%s: %v", EnvFile, p, err)
		}
		return abs, home, true, nil
	}
	if x := hostenv.Get(environ, "XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "sbx", "bindings.hcl"), home, false, nil
	}
	if home == "" {
		return "", "", false, fmt.Errorf("no home directory (HOME) to find the bindings file in; set %s to its path", EnvFile)
	}
	return filepath.Join(home, ".config", "sbx", "bindings.hcl"), home, false, nil
}

// Find loads the bindings file of the environment environ (Path): a
// missing file at the default path is no bindings; a missing file that
// SBX_BINDINGS names is an error.
func Find(environ []string) (*File, hcl.Diagnostics) {
	path, home, named, err := Path(environ)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot find the bindings file", Detail: err.Error() + "."}}
	}
	return Load(path, Options{Home: home, Required: named})
}

// UnsafeError is the error for a bindings file that someone other than
// its user could have written, which sbx refuses to read: it says which
// commands run on the host.
type UnsafeError struct {
	Path    string
	Problem string // "is a symbolic link", "is owned by uid 1001, not by you (uid 1000)"
	Fix     string // a command that fixes it, or ""
}

func (e *UnsafeError) Error() string {
	s := fmt.Sprintf("%s %s; sbx reads a bindings file only when it is a regular file of your own that no one else may write", e.Path, e.Problem)
	if e.Fix != "" {
		s += " (" + e.Fix + ")"
	}
	return s
}

// Load reads and parses the bindings file at path (Parse), after
// checking that it is this user's own: a regular file, not a symbolic
// link, owned by this user and not writable by group or others, in
// directories owned by this user or root that others may not write to
// (unless sticky, as /tmp is), so that no other user can have put a
// command in it. Anything else is an error (an *UnsafeError in the
// diagnostic's Extra). A missing file gives a File with Exists false
// and no bindings, unless opts.Required.
func Load(path string, opts Options) (*File, hcl.Diagnostics) {
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, refused(path, err)
	}
	src, err := readOwn(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !opts.Required:
		return &File{Path: abs, home: opts.Home}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No bindings file",
			Detail:   fmt.Sprintf("%s names %s, which does not exist. Create it, or unset %s to use the default.", EnvFile, abs, EnvFile),
		}}
	case err != nil:
		return nil, refused(abs, err)
	}
	return Parse(src, abs, opts)
}

func refused(path string, err error) hcl.Diagnostics {
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Bindings file refused",
		Detail:   err.Error() + ".",
		Extra:    err,
	}}
}

// readOwn reads the file at path, absolute, under Load's rules.
func readOwn(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &UnsafeError{path, "is a symbolic link", "replace the link with a copy of the file it points to"}
	}
	if err := checkDirs(filepath.Dir(path)); err != nil {
		return nil, err
	}
	// O_NOFOLLOW and a check of what was opened, so that nothing
	// swapped in after the Lstat is read; O_NONBLOCK so that a named
	// pipe cannot hang the command.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &UnsafeError{path, "is a symbolic link", ""}
		}
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkFile(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFile)
	}
	return b, nil
}

// checkFile checks the opened bindings file.
func checkFile(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return &UnsafeError{path, "is not a regular file", ""}
	}
	if uid, me := owner(fi), os.Geteuid(); uid != me {
		return &UnsafeError{path, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", uid, me), "copy it to a file of your own"}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &UnsafeError{path, fmt.Sprintf("may be written by other users (mode %04o)", fi.Mode().Perm()), "chmod go-w " + path}
	}
	return nil
}

// checkDirs checks dir and every directory above it, as written and as
// it resolves: each is owned by this user or root, and one that others
// may write to is sticky, so that no one else can rename another file
// over the bindings file.
func checkDirs(dir string) error {
	paths := components(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		paths = append(paths, components(real)...)
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// Checked as it resolves, above.
			continue
		}
		if uid, me := owner(fi), os.Geteuid(); uid != me && uid != 0 {
			return &UnsafeError{p, fmt.Sprintf("(a directory above the bindings file) is owned by uid %d, neither you (uid %d) nor root", uid, me), ""}
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return &UnsafeError{p, fmt.Sprintf("(a directory above the bindings file) may be written by other users (mode %04o) and is not sticky", fi.Mode().Perm()), "chmod go-w " + p}
		}
	}
	return nil
}

// components returns p, absolute and clean, and every directory above
// it, from the root down.
func components(p string) []string {
	var out []string
	for {
		out = append(out, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
