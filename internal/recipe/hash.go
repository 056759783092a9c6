package recipe

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// encodingVersion opens the encoding InputHash hashes. Changing what is
// encoded, or how, must change this string, so that hashes from different
// encodings can never be confused.
const encodingVersion = "sbx-recipe-v1"

// InputHash returns "sha256:<hex>" over a canonical encoding of everything
// that affects img's bytes:
//
//   - the platform and root filesystem size;
//   - the pin of every input (base, kernel, each artifact): its kind and
//     every content field (digest, manifest, version, integrity, sha256,
//     file name) but not the source string, so two sources that resolve
//     to the same content hash the same;
//   - the kernel's file, modules (in declared order, the order they are
//     loaded in) and command line;
//   - each artifact, sorted by name: name, file, dest, extract,
//     keep_special (when set), mode, uid, gid;
//   - each user, sorted by name: uid, gid, home, shell, groups (in
//     declared order);
//   - each file, sorted by path: content, mode, uid, gid;
//   - the environment, sorted by name;
//   - when the image has packages or executables (and only then, so
//     that other recipes hash as before): the pin of the package request
//     ("packages") and every "package.NAME" pin, sorted by name, with its
//     architecture and size, and the executables in declared order.
//
// Declaration order of artifacts, users and files does not change the hash;
// builders must therefore apply them in the order Canonical returns. The
// image's name and source ranges are not part of the hash.
//
// pins is keyed like lockfiles.Image.Inputs ("base", "kernel",
// "artifact.NAME"); a recipe input without a pin is an error. Pins for keys
// the image does not use are ignored.
func InputHash(img *lang.Image, pins map[string]*lockfiles.Pin) (string, error) {
	if img == nil {
		return "", errors.New("no image to hash")
	}
	c, err := canonical(img)
	if err != nil {
		return "", err
	}
	pin := func(key string) (*lockfiles.Pin, error) {
		p := pins[key]
		if p == nil {
			return nil, fmt.Errorf("%s: %s is not locked", img.Addr(), key)
		}
		return p, nil
	}

	var e encoder
	e.raw(encodingVersion)
	// The name is the image's default hostname and is recorded in
	// /etc/sbx/image.json, so it is part of the bytes.
	e.str("name", img.Name)
	e.str("platform", img.Platform.String())
	e.int("size", img.Size)

	e.present("base", img.Base != nil)
	if img.Base != nil {
		p, err := pin("base")
		if err != nil {
			return "", err
		}
		e.pin(p)
	}

	e.present("kernel", img.Kernel != nil)
	if k := img.Kernel; k != nil {
		e.present("kernel.source", k.Source != nil)
		if k.Source != nil {
			p, err := pin("kernel")
			if err != nil {
				return "", err
			}
			e.pin(p)
		}
		e.str("file", k.File)
		e.strs("modules", k.Modules)
		e.str("cmdline", k.Cmdline)
	}

	e.count("artifacts", len(c.Artifacts))
	for _, a := range c.Artifacts {
		e.str("name", a.Name)
		e.present("source", a.Source != nil)
		if a.Source != nil {
			p, err := pin("artifact." + a.Name)
			if err != nil {
				return "", err
			}
			e.pin(p)
		}
		e.str("file", a.File)
		e.str("dest", a.Dest)
		e.present("extract", a.Extract)
		if a.KeepSpecial {
			// Encoded only when set, so that the hashes of recipes
			// without it stay what they were.
			e.present("keep_special", true)
		}
		e.int("mode", int64(a.Mode))
		e.int("uid", int64(a.UID))
		e.int("gid", int64(a.GID))
	}

	e.count("users", len(c.Users))
	for _, u := range c.Users {
		e.str("name", u.Name)
		e.int("uid", int64(u.UID))
		e.int("gid", int64(u.GID))
		e.str("home", u.Home)
		e.str("shell", u.Shell)
		e.strs("groups", u.Groups)
	}

	e.count("files", len(c.Files))
	for _, f := range c.Files {
		e.str("path", f.Path)
		e.str("content", f.Content)
		e.int("mode", int64(f.Mode))
		e.int("uid", int64(f.UID))
		e.int("gid", int64(f.GID))
	}

	links := sortedKeys(img.Symlinks)
	e.count("symlinks", len(links))
	for _, k := range links {
		e.str("path", k)
		e.str("target", img.Symlinks[k])
	}

	keys := sortedKeys(img.Env)
	e.count("env", len(keys))
	for _, k := range keys {
		e.str("name", k)
		e.str("value", img.Env[k])
	}

	if err := e.packages(img, pins); err != nil {
		return "", err
	}

	sum := sha256.Sum256(e.b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Canonical returns a shallow copy of img whose artifacts and users are
// sorted by name and files by path: the order InputHash encodes them in.
// Builders apply them in this order (later artifacts over earlier ones,
// users appended to the account files in turn), so that the input hash
// alone determines the image's bytes whatever order the spec declares
// them in. Canonical(nil) is nil.
func Canonical(img *lang.Image) *lang.Image {
	if img == nil {
		return nil
	}
	c, _ := canonical(img)
	return c
}

// canonical sorts like Canonical and reports duplicate names or paths,
// which would make the order ambiguous.
func canonical(img *lang.Image) (*lang.Image, error) {
	c := *img
	c.Artifacts = append([]*lang.Artifact(nil), img.Artifacts...)
	sort.SliceStable(c.Artifacts, func(i, j int) bool { return c.Artifacts[i].Name < c.Artifacts[j].Name })
	c.Users = append([]*lang.User(nil), img.Users...)
	sort.SliceStable(c.Users, func(i, j int) bool { return c.Users[i].Name < c.Users[j].Name })
	c.Files = append([]*lang.File(nil), img.Files...)
	sort.SliceStable(c.Files, func(i, j int) bool { return c.Files[i].Path < c.Files[j].Path })
	for i := 1; i < len(c.Artifacts); i++ {
		if c.Artifacts[i].Name == c.Artifacts[i-1].Name {
			return &c, fmt.Errorf("%s: artifact %q is declared more than once", img.Addr(), c.Artifacts[i].Name)
		}
	}
	for i := 1; i < len(c.Users); i++ {
		if c.Users[i].Name == c.Users[i-1].Name {
			return &c, fmt.Errorf("%s: user %q is declared more than once", img.Addr(), c.Users[i].Name)
		}
	}
	for i := 1; i < len(c.Files); i++ {
		if c.Files[i].Path == c.Files[i-1].Path {
			return &c, fmt.Errorf("%s: file %q is declared more than once", img.Addr(), c.Files[i].Path)
		}
	}
	return &c, nil
}

// encoder builds the byte string InputHash hashes. Every value is tagged
// with its field name and every string and list is length-prefixed, so
// the encoding is unambiguous: no two different recipes encode the same.
type encoder struct {
	b []byte
}

func (e *encoder) raw(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) str(name, v string) {
	e.raw(name)
	e.raw(v)
}

func (e *encoder) int(name string, v int64) {
	e.raw(name)
	e.b = binary.AppendVarint(e.b, v)
}

func (e *encoder) count(name string, n int) {
	e.raw(name)
	e.b = binary.AppendUvarint(e.b, uint64(n))
}

func (e *encoder) present(name string, ok bool) {
	e.raw(name)
	if ok {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) strs(name string, list []string) {
	e.count(name, len(list))
	for _, s := range list {
		e.raw(s)
	}
}

// pin encodes a pin's content fields. Source is left out on purpose: it
// is how the content was found, not what it is.
// packages encodes an image's package pins and executables.
func (e *encoder) packages(img *lang.Image, pins map[string]*lockfiles.Pin) error {
	p := img.Packages
	if len(p.Requests) == 0 && len(p.Executables) == 0 {
		return nil
	}
	e.raw("packages")
	var names []string
	if len(p.Requests) > 0 {
		req := pins[lockfiles.PackagesKey]
		if req == nil {
			return fmt.Errorf("%s: packages are not locked", img.Addr())
		}
		e.pin(req)
		for k := range pins {
			if strings.HasPrefix(k, lockfiles.PackageKeyPrefix) {
				names = append(names, k)
			}
		}
		sort.Strings(names)
	}
	e.count("package", len(names))
	for _, k := range names {
		e.str("key", k)
		e.pin(pins[k])
		e.str("architecture", pins[k].Architecture)
		e.str("size", pins[k].Size)
	}
	e.strs("executables", p.Executables)
	return nil
}

func (e *encoder) pin(p *lockfiles.Pin) {
	e.str("kind", p.Kind)
	e.str("digest", p.Digest)
	e.str("manifest", p.Manifest)
	e.str("version", p.Version)
	e.str("integrity", p.Integrity)
	e.str("sha256", p.SHA256)
	e.str("filename", p.Filename)
}
