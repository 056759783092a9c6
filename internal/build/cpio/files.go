package cpio

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// File is an archive member with its contents, for WriteFiles.
type File struct {
	Entry
	// Open returns a regular file's contents, Size bytes. It is called
	// once, when the file is written. Nil means no contents.
	Open func() (io.ReadCloser, error)
}

// Bytes returns an Open function for contents held in memory.
func Bytes(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// ImpliedDirMode is the mode of a parent directory that Sort adds because
// files do not list it; such directories are owned by root. List a
// directory to give it another mode or owner.
const ImpliedDirMode = TypeDir | 0o755

// Sort returns files in archive order, ready for a Writer:
//
//   - names are cleaned, and sorted by path element so that every directory
//     comes before what it holds;
//   - a parent directory that is not listed is added with [ImpliedDirMode];
//   - the files of a hard-link group (a regular file and the entries whose
//     HardLink name it) are written as one file under the name that sorts
//     first, with the other names linking to it and NLink counting them all.
//
// It reports duplicate names, a parent that is not a directory, and a hard
// link to a name that is not a regular file in files.
func Sort(files []File) ([]File, error) {
	byName := make(map[string]File, len(files))
	for _, f := range files {
		name, err := CleanName(f.Name)
		if err != nil {
			return nil, err
		}
		if _, dup := byName[name]; dup {
			return nil, fmt.Errorf("cpio: %s: listed twice", name)
		}
		f.Name = name
		if f.HardLink != "" {
			if f.HardLink, err = CleanName(f.HardLink); err != nil {
				return nil, fmt.Errorf("cpio: %s: hard link: %w", name, err)
			}
		}
		byName[name] = f
	}

	// Parents.
	for name := range byName {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			p, ok := byName[dir]
			if !ok {
				byName[dir] = File{Entry: Entry{Name: dir, Mode: ImpliedDirMode}}
				continue
			}
			if p.Mode&TypeMask != TypeDir || p.HardLink != "" {
				return nil, fmt.Errorf("cpio: %s: parent %s is not a directory", name, dir)
			}
		}
	}

	sorted := make([]File, 0, len(byName))
	for _, f := range byName {
		sorted = append(sorted, f)
	}
	slices.SortFunc(sorted, func(a, b File) int { return comparePaths(a.Name, b.Name) })

	// Hard-link groups, keyed by the file holding the data.
	groups := map[string][]int{}
	for i, f := range sorted {
		if f.HardLink == "" {
			continue
		}
		t, ok := byName[f.HardLink]
		if !ok || t.HardLink != "" || t.Mode&TypeMask != TypeRegular {
			return nil, fmt.Errorf("cpio: %s: hard link to %s, which is not a regular file in the archive", f.Name, f.HardLink)
		}
		groups[f.HardLink] = append(groups[f.HardLink], i)
	}
	index := make(map[string]int, len(sorted))
	for i, f := range sorted {
		index[f.Name] = i
	}
	for target, links := range groups {
		members := append(links, index[target])
		slices.Sort(members)
		data := byName[target]
		first := sorted[members[0]].Name
		for k, i := range members {
			name := sorted[i].Name
			if k == 0 {
				sorted[i] = data
				sorted[i].Name = name
				sorted[i].NLink = uint32(len(members))
				continue
			}
			sorted[i] = File{Entry: Entry{Name: name, HardLink: first}}
		}
	}
	return sorted, nil
}

// comparePaths orders slash-separated paths element by element, so that
// "a/b" sorts before "a.b" and every directory before its contents.
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		ea, ra, _ := strings.Cut(a, "/")
		eb, rb, _ := strings.Cut(b, "/")
		if c := strings.Compare(ea, eb); c != 0 {
			if ea == "." {
				return -1
			}
			if eb == "." {
				return 1
			}
			return c
		}
		a, b = ra, rb
	}
	return strings.Compare(a, b)
}

// WriteFiles writes files to w as a complete archive, in the order Sort
// gives, every entry stamped with mtime.
func WriteFiles(w io.Writer, mtime int64, files []File) error {
	sorted, err := Sort(files)
	if err != nil {
		return err
	}
	cw := NewWriter(w, mtime)
	for _, f := range sorted {
		if err := writeFile(cw, f); err != nil {
			return err
		}
	}
	return cw.Close()
}

func writeFile(cw *Writer, f File) error {
	if f.Open == nil || f.HardLink != "" || f.Mode&TypeMask != TypeRegular {
		return cw.WriteEntry(f.Entry, nil)
	}
	body, err := f.Open()
	if err != nil {
		return fmt.Errorf("cpio: %s: %w", f.Name, err)
	}
	defer body.Close()
	return cw.WriteEntry(f.Entry, body)
}
