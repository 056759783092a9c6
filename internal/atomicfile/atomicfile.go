package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Write runs write on a new temporary file beside path and, when it
// succeeds, syncs the file, sets perm and renames it to path: WriteIn in
// path's directory, so a symbolic link planted at the temporary name is
// never followed and one at path is replaced, not written through.
// Errors are prefixed with "writing PATH".
func Write(path string, perm os.FileMode, write func(f *os.File) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer root.Close()
	return WriteIn(root, base, perm, write)
}

// WriteBytes replaces path with data (see Write).
func WriteBytes(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// WriteIn is Write for the file name directly inside the directory root:
// the temporary file is created in root (exclusively, so a symbolic link
// planted at its name is never followed) and renamed over name, which
// replaces a symbolic link at name rather than writing through it. No
// path is resolved again between the two, so name stays in the directory
// root was opened on even if that directory is renamed or replaced
// meanwhile. name must be a plain file name, not a path. Errors are
// prefixed with "writing ROOT/NAME".
func WriteIn(root *os.Root, name string, perm os.FileMode, write func(f *os.File) error) (err error) {
	path := filepath.Join(root.Name(), name)
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		return fmt.Errorf("writing %s: %q is not a file name", path, name)
	}
	var (
		f   *os.File
		tmp string
	)
	for try := 0; ; try++ {
		tmp = "." + name + ".tmp-" + strconv.FormatUint(uint64(rand.Uint32()), 10)
		f, err = root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = root.Rename(tmp, name); err != nil {
		return err
	}
	if d, derr := root.Open("."); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
