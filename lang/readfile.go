package lang

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ReadFile reads the file name (relative, without "..") of the
// configuration directory dir under the rules the configuration's own
// files and file() are read by, for other files a checkout holds that sbx
// reads (a project .npmrc): through an os.Root of dir, so that a symbolic
// link is followed only while it stays inside; opened without waiting, so
// that a named pipe cannot block; only a regular file (not a pipe, device,
// socket or directory); at most 16 MiB. A missing file is an error
// satisfying errors.Is(err, fs.ErrNotExist). Errors name dir/name and
// quote nothing of what a link points at.
func ReadFile(dir, name string) ([]byte, error) {
	return ReadFileLimit(dir, name, maxFileSize)
}

// ReadFileLimit is ReadFile with a size cap of limit bytes instead of
// 16 MiB, for files sbx writes itself and reads back from a checkout (a
// saved plan, the state) that may be larger.
func ReadFileLimit(dir, name string, limit int64) ([]byte, error) {
	shown := filepath.Join(dir, name)
	if name == "" || filepath.IsAbs(name) || !filepath.IsLocal(name) {
		return nil, fmt.Errorf("%s: the name must be relative to the configuration directory, inside it", shown)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", shown, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("%s: the configuration directory cannot be opened: %v", shown, pathErrText(err))
	}
	defer root.Close()
	f, err := root.OpenFile(name, readOnlyFlags, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, lerr := root.Lstat(name); lerr == nil {
				// The name is there: a link whose target is not.
				return nil, fmt.Errorf("%s is a symbolic link whose target does not exist", shown)
			}
			return nil, fmt.Errorf("%s: %w", shown, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("cannot read %s: %v", shown, pathErrText(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", shown, pathErrText(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", shown, describeMode(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %s", shown, FormatSize(limit))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", shown, pathErrText(err))
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %s", shown, FormatSize(limit))
	}
	return b, nil
}
