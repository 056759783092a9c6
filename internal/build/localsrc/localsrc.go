package localsrc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sbx-dev/sbx/lang"
)

// OpenFile opens the regular file a file: source names, inside its
// root (lang.Source.LocalRoot; configDir is the configuration directory).
// path is the file's host path, for messages. A path that leads out of the
// root is an error naming the spec position and the source.
func OpenFile(configDir string, src *lang.Source) (f *os.File, path string, err error) {
	root, rel, err := src.LocalRoot(configDir)
	if err != nil {
		return nil, "", fmt.Errorf("%s%w", Position(src), err)
	}
	path = filepath.Join(root, rel)
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, path, fmt.Errorf("%s%s: %w", Position(src), src.Raw, err)
	}
	defer r.Close()
	f, err = r.Open(rel)
	if err != nil {
		return nil, path, localError(src, root, path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, path, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, path, fmt.Errorf("%s is not a regular file", path)
	}
	return f, path, nil
}

// Layout is a local OCI image layout directory opened inside its root.
// Its blobs are read through the root too: a blob that is a symbolic link
// out of it is refused. Close releases it.
type Layout struct {
	// Dir is the layout's host path, for messages.
	Dir  string
	root *os.Root
}

// OpenLayout opens the OCI image layout an oci-layout: source names,
// inside its root (lang.Source.LocalRoot). Errors name the spec position,
// the source and the path.
func OpenLayout(configDir string, src *lang.Source) (*Layout, error) {
	root, rel, err := src.LocalRoot(configDir)
	if err != nil {
		return nil, fmt.Errorf("%s%w", Position(src), err)
	}
	dir := filepath.Join(root, rel)
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", Position(src), src.Raw, err)
	}
	defer r.Close()
	// Opened as a root of its own: what the layout holds is confined to
	// the layout's directory, which lies inside root.
	lr, err := r.OpenRoot(rel)
	if err != nil {
		if escapes(err) {
			return nil, localError(src, root, dir, err)
		}
		return nil, fmt.Errorf("%s%s: %s is not an OCI image layout: %w", Position(src), src.Raw, dir, pathErr(err))
	}
	if _, err := lr.Stat("index.json"); err != nil {
		lr.Close()
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", dir, pathErr(err))
	}
	return &Layout{Dir: dir, root: lr}, nil
}

// Close releases the layout's directory.
func (l *Layout) Close() error { return l.root.Close() }

// maxIndex bounds index.json and the manifests read into memory.
const maxIndex = 16 << 20

// Index reads the layout's index.json.
func (l *Layout) Index() (*v1.IndexManifest, error) {
	f, err := l.open("index.json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	im, err := v1.ParseIndexManifest(io.LimitReader(f, maxIndex))
	if err != nil {
		return nil, fmt.Errorf("%s/index.json: %w", l.Dir, err)
	}
	return im, nil
}

// Blob opens the blob with digest h (blobs/ALGORITHM/HEX). The caller
// checks its digest.
func (l *Layout) Blob(h v1.Hash) (io.ReadCloser, error) {
	// NewHash checks that the hex is the algorithm's length and lower case.
	if _, err := v1.NewHash(h.String()); h.Algorithm != "sha256" || err != nil {
		return nil, fmt.Errorf("%s: blob %s: only sha256 digests are supported", l.Dir, h)
	}
	return l.open(filepath.Join("blobs", h.Algorithm, h.Hex))
}

// Where is the host path of the blob with digest h, for messages.
func (l *Layout) Where(h v1.Hash) string {
	return filepath.Join(l.Dir, "blobs", h.Algorithm, h.Hex)
}

func (l *Layout) open(rel string) (*os.File, error) {
	p := filepath.Join(l.Dir, rel)
	f, err := l.root.Open(rel)
	if err != nil {
		if escapes(err) {
			return nil, fmt.Errorf("%s leads outside the layout directory %s (through a symbolic link); a layout's files must lie inside it", p, l.Dir)
		}
		return nil, fmt.Errorf("%s: %w", p, pathErr(err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return f, nil
}

// localError explains why path, the host path of a local source inside
// root, could not be opened.
func localError(src *lang.Source, root, path string, err error) error {
	if escapes(err) {
		where := "the configuration directory " + root
		if src.HostPath != "" {
			where = "the host path " + root
		}
		return fmt.Errorf("%s%s: %s leads outside %s through a symbolic link; local sources are read inside it (list another directory in the image's host_paths to read from it)",
			Position(src), src.Raw, path, where)
	}
	return fmt.Errorf("%s%s: %s: %w", Position(src), src.Raw, path, pathErr(err))
}

// escapes reports whether err is os.Root refusing a path that leaves it.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// pathErr drops the operation and path of a *fs.PathError, which the
// caller names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Position names a source's position in the spec as "file:line: ", or ""
// for a source made in code.
func Position(src *lang.Source) string {
	if src.Range.Filename == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d: ", src.Range.Filename, src.Range.Start.Line)
}
