package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The configuration directory, and with it .sbx, may come from an
// untrusted checkout. Everything below opens .sbx and the files in it
// without following a symbolic link at any step, so a link planted there
// cannot make sbx read or write a file elsewhere:
//
//   - .sbx must be a directory, not a link to one; it is opened once
//     (openDir) and every file in it is reached relative to that handle;
//   - a state or lock file must be a regular file, not a link (checked with
//     Lstat, and the opened file must be the one Lstat saw);
//   - the state file is replaced by atomicfile.WriteIn, which creates its
//     temporary file exclusively and renames it over the old name.

// openDir opens dir/.sbx. When it does not exist, openDir creates it
// (mode 0755) if create is set and otherwise returns (nil, nil), as it
// does when dir itself does not exist. A .sbx that is a symbolic link or
// not a directory is an error naming it.
func openDir(dir string, create bool) (*os.Root, error) {
	path := filepath.Join(dir, Dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		if !create && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(Dir)
	if errors.Is(err, fs.ErrNotExist) {
		if !create {
			return nil, nil
		}
		if err := root.Mkdir(Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating %s: %w", path, pathErr(err))
		}
		fi, err = root.Lstat(Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, pathErr(err))
	}
	if err := checkType(path, fi, fs.ModeDir); err != nil {
		return nil, err
	}
	sub, err := root.OpenRoot(Dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, pathErr(err))
	}
	// OpenRoot follows a link that stays inside dir: make sure what was
	// opened is the directory Lstat saw, not a link swapped in since.
	if got, err := sub.Stat("."); err != nil || !os.SameFile(fi, got) {
		sub.Close()
		return nil, fmt.Errorf("%s changed while it was being opened; refusing to use it", path)
	}
	return sub, nil
}

// checkType returns an error naming path unless fi (from Lstat) is of the
// wanted type: fs.ModeDir for a directory, 0 for a regular file.
func checkType(path string, fi fs.FileInfo, want fs.FileMode) error {
	typ := fi.Mode().Type()
	if typ == want {
		return nil
	}
	what := "a regular file"
	if want == fs.ModeDir {
		what = "a directory"
	}
	if typ&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link; sbx keeps its state in %s there and does not follow links (remove it and run sbx again)", path, what)
	}
	return fmt.Errorf("%s is not %s (it is a %s); sbx keeps its state in %s there", path, what, typeName(typ), what)
}

// typeName names a file type for messages.
func typeName(typ fs.FileMode) string {
	switch {
	case typ == 0:
		return "regular file"
	case typ&fs.ModeDir != 0:
		return "directory"
	case typ&fs.ModeNamedPipe != 0:
		return "named pipe"
	case typ&fs.ModeSocket != 0:
		return "socket"
	case typ&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// openFile opens the regular file name in the state directory d with flag
// (os.O_RDONLY or os.O_RDWR; never O_CREATE), refusing a symbolic link or
// any other kind of file. A missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func openFile(d *os.Root, name string, flag int) (*os.File, error) {
	path := filepath.Join(d.Name(), name)
	fi, err := d.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, pathErr(err))
	}
	if err := checkType(path, fi, 0); err != nil {
		return nil, err
	}
	f, err := d.OpenFile(name, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, pathErr(err))
	}
	if err := sameFile(f, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// createFile creates the file name in d, which must not exist; it never
// follows a symbolic link at name. It returns fs.ErrExist when name exists.
func createFile(d *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fs.ErrExist
		}
		return nil, fmt.Errorf("creating %s: %w", filepath.Join(d.Name(), name), pathErr(err))
	}
	return f, nil
}

// sameFile checks that the open file f is the file fi describes.
func sameFile(f *os.File, fi fs.FileInfo) error {
	got, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), pathErr(err))
	}
	if !os.SameFile(fi, got) || !got.Mode().IsRegular() {
		return fmt.Errorf("%s changed while it was being opened; refusing to use it", f.Name())
	}
	return nil
}

// maxStateSize bounds how much of a state file is read.
const maxStateSize = 64 << 20

// readFile reads the regular file name in d (see openFile).
func readFile(d *os.Root, name string) ([]byte, error) {
	f, err := openFile(d, name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), pathErr(err))
	}
	if len(data) > maxStateSize {
		return nil, fmt.Errorf("%s is larger than %d MiB; it was not written by sbx", f.Name(), maxStateSize>>20)
	}
	return data, nil
}

// pathErr drops the operation and path of a *fs.PathError, which the
// messages here name themselves.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
