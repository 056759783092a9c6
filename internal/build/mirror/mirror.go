package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/lang"
)

// EnvVar is the environment variable that names the mirror directory.
const EnvVar = "SBX_MIRROR_DIR"

// Found is what Find found for one input.
type Found struct {
	// Path is the file whose content has the wanted sha256; "" when the
	// directory holds none.
	Path string
	// Rejected describes each candidate whose content has another
	// sha256, for the error of a download that then fails too.
	Rejected []string
}

// Find looks in dir for a copy of the content of rawURL whose sha256 is
// sha (lower-case hex): the file named sha, then the file named as the
// last element of the URL's path. Each candidate is opened inside dir
// (os.Root: no symbolic link leads out of it), must be a regular file,
// and is hashed in full. A missing candidate is no error; one that cannot
// be read is. dir "" or sha "" finds nothing.
func Find(ctx context.Context, dir, rawURL, sha string) (Found, error) {
	var found Found
	if dir == "" || sha == "" {
		return found, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return found, fmt.Errorf("%s %s: %w", EnvVar, dir, unwrapPath(err))
	}
	defer root.Close()
	for _, name := range candidates(rawURL, sha) {
		got, err := hashIn(ctx, root, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return found, fmt.Errorf("%s: %s: %w", EnvVar, path.Join(dir, name), err)
		case got == sha:
			found.Path = path.Join(dir, name)
			return found, nil
		}
		found.Rejected = append(found.Rejected, fmt.Sprintf("%s has sha256 %s", path.Join(dir, name), got))
	}
	return found, nil
}

// names lists the names Find looks at for a copy, URL's name first.
func names(rawURL, sha string) string {
	c := candidates(rawURL, sha)
	slices.Reverse(c)
	return strings.Join(c, " or ")
}

// candidates are the names Find looks at, in order.
func candidates(rawURL, sha string) []string {
	names := []string{sha}
	if u, err := url.Parse(rawURL); err == nil {
		if base := path.Base(u.Path); base != "." && base != "/" && base != ".." && base != sha && !strings.ContainsRune(base, '\\') {
			names = append(names, base)
		}
	}
	return names
}

func hashIn(ctx context.Context, root *os.Root, name string) (string, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", unwrapPath(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	got, _, err := digest.Reader(ctx, f)
	return got, err
}

// unwrapPath drops *fs.PathError's repetition of a path the message
// names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Hint is the advice added to a failed download of src, whose sha256 is
// sha ("" when neither spec nor lock states one): where the source comes
// from a variable, the variable to point elsewhere, and the mirror
// directory that satisfies the pin with a local copy. found is what Find
// found (nothing, or only rejected candidates) in dir.
func Hint(src *lang.Source, sha, dir string, found Found) string {
	var b strings.Builder
	for _, v := range src.Vars {
		fmt.Fprintf(&b, " The source is the value of var.%s: set it to a URL this host can reach (-var %s=https://… or SBX_VAR_%s).", v, v, v)
	}
	switch {
	case sha == "":
		b.WriteString(" A local copy can stand in for it once its sha256 is known: declare sha256 for it in the spec, then put the file in the directory " + EnvVar + " names.")
	case dir == "":
		fmt.Fprintf(&b, " Or put a copy whose sha256 is %s in a directory, named %s, and name the directory with %s.", sha, names(src.Ref, sha), EnvVar)
	case len(found.Rejected) > 0:
		fmt.Fprintf(&b, " %s (%s) holds no copy whose sha256 is %s: %s.", EnvVar, dir, sha, strings.Join(found.Rejected, "; "))
	default:
		fmt.Fprintf(&b, " %s (%s) holds no copy of it: put the file whose sha256 is %s there, named %s.", EnvVar, dir, sha, names(src.Ref, sha))
	}
	return strings.TrimSpace(b.String())
}
