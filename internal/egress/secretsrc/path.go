package secretsrc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FilePath returns the absolute path a "file:PATH" source names (PATH
// relative to dir, "~/" the home directory), after checking what
// Resolve checks of it: a regular file owned by this user. It is for a
// secret whose file the host keeps using (an OAuth login's credential
// file, which the host reads and writes back), rather than reading it
// once. Errors are *Error and name the source.
func FilePath(source, dir string) (string, error) {
	arg, ok := strings.CutPrefix(source, "file:")
	if !ok || arg == "" {
		return "", &Error{source, errors.New(`want "file:PATH"`)}
	}
	path := arg
	if rest, ok := strings.CutPrefix(arg, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", &Error{source, err}
		}
		path = filepath.Join(home, rest)
	} else if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return "", &Error{source, err}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", &Error{source, err}
	}
	if !fi.Mode().IsRegular() {
		return "", &Error{source, fmt.Errorf("%s is not a regular file", path)}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return "", &Error{source, fmt.Errorf("%s is not owned by this user", path)}
	}
	return path, nil
}
