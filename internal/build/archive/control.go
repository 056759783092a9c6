package archive

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Fields are a package's own metadata: the fields of a Debian control
// file ("Package", "Version", "Depends", …) or the keys of an Alpine
// .PKGINFO ("pkgname", "pkgver", "depend", …). A multi-line Debian field
// keeps its continuation lines joined by "\n"; a .PKGINFO key given more
// than once ("depend") has its values joined by ", ".
type Fields map[string]string

// Get returns the field called name, compared without regard to case as
// Debian field names are.
func (f Fields) Get(name string) string {
	if v, ok := f[name]; ok {
		return v
	}
	for k, v := range f {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// Control reads the package metadata of a .deb (its control file) or an
// .apk (its .PKGINFO). Other formats carry none and give an error.
func Control(r io.Reader) (Fields, error) {
	br := bufio.NewReaderSize(r, detectLen)
	head, err := br.Peek(detectLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	f, err := Detect(head)
	if err != nil {
		return nil, err
	}
	switch f {
	case Deb:
		return debControl(br)
	case APK:
		return apkControl(br)
	}
	return nil, fmt.Errorf("a %s archive carries no package metadata; want a .deb or .apk", f)
}

func debControl(br *bufio.Reader) (Fields, error) {
	var fields Fields
	found := false
	err := arMembers(br, func(name string, body *bufio.Reader) (bool, error) {
		if !strings.HasPrefix(name, "control.tar") {
			return false, nil
		}
		zr, err := decompressor(body, sniff(body))
		if err != nil {
			return true, fmt.Errorf("deb member %s: %w", name, err)
		}
		defer zr.Close()
		_, err = walkTar(zr, func(hdr *tar.Header, body io.Reader) error {
			if hdr.Name != "control" || hdr.Typeflag != tar.TypeReg {
				return nil
			}
			found = true
			b, err := io.ReadAll(io.LimitReader(body, 1<<20))
			if err != nil {
				return err
			}
			fields, err = parseDebControl(string(b))
			if err != nil {
				return err
			}
			return fs.SkipAll
		})
		if err != nil {
			return true, fmt.Errorf("deb member %s: %w", name, err)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("deb has no control file")
	}
	return fields, nil
}

// parseDebControl parses the first paragraph of a deb822 control file.
func parseDebControl(s string) (Fields, error) {
	f := Fields{}
	key := ""
	for i, line := range strings.Split(s, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			if len(f) > 0 {
				return f, nil
			}
		case line[0] == ' ' || line[0] == '\t':
			if key == "" {
				return nil, fmt.Errorf("control line %d: continuation line with no field", i+1)
			}
			f[key] += "\n" + strings.TrimSpace(line)
		case line[0] == '#':
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("control line %d: no colon in %q", i+1, line)
			}
			key = strings.TrimSpace(k)
			f[key] = strings.TrimSpace(v)
		}
	}
	if len(f) == 0 {
		return nil, errors.New("control file has no fields")
	}
	return f, nil
}

func apkControl(br *bufio.Reader) (Fields, error) {
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("apk: %w", err)
	}
	defer zr.Close()
	for seg := 0; ; seg++ {
		zr.Multistream(false)
		var fields Fields
		stopped, err := walkTar(zr, func(hdr *tar.Header, body io.Reader) error {
			if hdr.Name != ".PKGINFO" {
				return nil
			}
			b, err := io.ReadAll(io.LimitReader(body, 1<<20))
			if err != nil {
				return err
			}
			fields = parsePKGINFO(string(b))
			return fs.SkipAll
		})
		if err != nil {
			return nil, fmt.Errorf("apk segment %d: %w", seg, err)
		}
		if stopped {
			return fields, nil
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			return nil, fmt.Errorf("apk segment %d: %w", seg, err)
		}
		if err := zr.Reset(br); err == io.EOF {
			return nil, errors.New("apk has no .PKGINFO")
		} else if err != nil {
			return nil, fmt.Errorf("apk segment %d: %w", seg+1, err)
		}
	}
}

func parsePKGINFO(s string) Fields {
	f := Fields{}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if old, ok := f[k]; ok {
			v = old + ", " + v
		}
		f[k] = v
	}
	return f
}
