package fanout

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
)

// MaxDiffFile is the largest file, on either side, that the unified diff
// shows line by line; larger ones, and files that are not UTF-8 text,
// are reported as binary. The tarball always has the whole file.
const MaxDiffFile = 1 << 20

// mountTrees are one mount's changes in one run and the two trees they
// were found between.
type mountTrees struct {
	base, run string
	changes   []Change
}

// WriteTar writes a tar archive of what the changes added or modified,
// read from the tree run, under their guest paths without the leading
// slash ("workspace/src/main.go"): directories, regular files with their
// content and symbolic links, with their permission bits and times,
// owned by uid and gid 0. Deletions have no entry (the index lists
// them); nor have paths of TypeOther.
func WriteTar(w io.Writer, run string, changes []Change) error {
	return writeTar(w, []mountTrees{{run: run, changes: changes}})
}

func writeTar(w io.Writer, ms []mountTrees) error {
	tw := tar.NewWriter(w)
	for _, m := range ms {
		root, err := os.OpenRoot(m.run)
		if err != nil {
			return err
		}
		err = tarMount(tw, root, m.changes)
		root.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func tarMount(tw *tar.Writer, root *os.Root, changes []Change) error {
	for _, ch := range changes {
		if ch.Change == Deleted || ch.Type == TypeOther {
			continue
		}
		info, err := root.Lstat(dot(ch.rel))
		if err != nil {
			return err
		}
		link := ""
		if ch.Type == TypeSymlink {
			if link, err = root.Readlink(ch.rel); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = strings.TrimPrefix(ch.Path, "/")
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		f, err := openRegular(root, ch.rel, info)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, io.LimitReader(f, info.Size()))
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", ch.Path, err)
		}
	}
	return nil
}

// writeDiff writes a unified diff, in git's layout, of the regular files
// the changes touch: each file's header with its mode change, then its
// hunks, or a "Binary files ... differ" line for a file that is large or
// not text. Links and directories are left to the tarball.
func writeDiff(w io.Writer, ms []mountTrees) error {
	for _, m := range ms {
		if err := diffMount(w, m); err != nil {
			return err
		}
	}
	return nil
}

func diffMount(w io.Writer, m mountTrees) error {
	br, err := os.OpenRoot(m.base)
	if err != nil {
		return err
	}
	defer br.Close()
	rr, err := os.OpenRoot(m.run)
	if err != nil {
		return err
	}
	defer rr.Close()
	for _, ch := range m.changes {
		old, oldInfo, err := readSide(br, ch.rel, ch.Change != Added)
		if err != nil {
			return err
		}
		cur, curInfo, err := readSide(rr, ch.rel, ch.Change != Deleted)
		if err != nil {
			return err
		}
		if oldInfo == nil && curInfo == nil {
			continue
		}
		p := strings.TrimPrefix(ch.Path, "/")
		a, b := "a/"+p, "b/"+p
		var hdr strings.Builder
		fmt.Fprintf(&hdr, "diff --git %s %s\n", a, b)
		switch {
		case oldInfo == nil:
			fmt.Fprintf(&hdr, "new file mode %s\n", gitMode(curInfo))
			a = "/dev/null"
		case curInfo == nil:
			fmt.Fprintf(&hdr, "deleted file mode %s\n", gitMode(oldInfo))
			b = "/dev/null"
		case gitMode(oldInfo) != gitMode(curInfo):
			fmt.Fprintf(&hdr, "old mode %s\nnew mode %s\n", gitMode(oldInfo), gitMode(curInfo))
		}
		var body string
		if !isText(old, oldInfo) || !isText(cur, curInfo) {
			body = fmt.Sprintf("Binary files %s and %s differ\n", a, b)
		} else {
			body = udiff.Unified(a, b, string(old), string(cur))
		}
		if _, err := io.WriteString(w, hdr.String()+body); err != nil {
			return err
		}
	}
	return nil
}

// readSide reads rel of root when want is set and it is a regular file
// there: its first MaxDiffFile+1 bytes and its Lstat. Anything else is
// no file (nil info).
func readSide(root *os.Root, rel string, want bool) ([]byte, fs.FileInfo, error) {
	if !want {
		return nil, nil, nil
	}
	info, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, nil
	}
	f, err := openRegular(root, rel, info)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDiffFile+1))
	return data, info, err
}

// isText reports whether a file (nil info: none) can be diffed by lines.
func isText(data []byte, info fs.FileInfo) bool {
	if info == nil {
		return true
	}
	return info.Size() <= MaxDiffFile && len(data) <= MaxDiffFile && utf8.Valid(data) && !bytes.ContainsRune(data, 0)
}

// gitMode is a regular file's mode as git writes it.
func gitMode(info fs.FileInfo) string {
	if info.Mode().Perm()&0o111 != 0 {
		return "100755"
	}
	return "100644"
}
