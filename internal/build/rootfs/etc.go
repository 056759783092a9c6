package rootfs

import (
	"archive/tar"
	"fmt"
	"slices"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"github.com/sbx-dev/sbx/lang"
)

// hostname returns the host name the image gets: Options.Hostname, checked,
// or one made from the image's name.
func (a *assembler) hostname() (string, error) {
	if h := a.opts.Hostname; h != "" {
		if err := checkHostname(h); err != nil {
			return "", fmt.Errorf("image %q: host name %q: %w", a.img.Name, h, err)
		}
		return h, nil
	}
	return hostnameFor(a.img.Name), nil
}

// hostnameFor makes a host name of an image name: lower case, characters
// other than letters, digits and "-" replaced by "-", no "-" at either
// end, at most 63 characters; "sbx" if nothing is left.
func hostnameFor(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	h := strings.Trim(string(b[:min(len(b), 63)]), "-")
	if h == "" {
		return "sbx"
	}
	return h
}

// checkHostname accepts a host name: dot-separated labels of letters,
// digits and "-", each 1 to 63 characters and not starting or ending in
// "-", 253 characters in all.
func checkHostname(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("each dot-separated label must have 1 to 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with \"-\"", l)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("label %q has %q; use letters, digits and \"-\"", l, c)
			}
		}
	}
	return nil
}

// etc writes the files sbx itself puts in /etc.
func (a *assembler) etc(hostname string, env map[string]string, users []imageinfo.User) error {
	info := &imageinfo.Info{
		Version:     imageinfo.Version,
		Name:        a.img.Name,
		Platform:    a.img.Platform.String(),
		InputHash:   a.opts.InputHash,
		Hostname:    hostname,
		Users:       users,
		Network:     imageinfo.DefaultNetwork(),
		CACert:      imageinfo.CACertPath,
		Packages:    a.inventory,
		Executables: a.execs,
	}
	if len(env) > 0 {
		info.Env = env
	}
	doc, err := imageinfo.Encode(info)
	if err != nil {
		return err
	}
	files := []struct {
		path    string
		content string
	}{
		{"/etc/hostname", hostname + "\n"},
		{"/etc/hosts", hostsFile(hostname)},
		{"/etc/resolv.conf", "nameserver " + imageinfo.DNS + "\n"},
		{imageinfo.Path, string(doc)},
	}
	if len(env) > 0 {
		files = append(files,
			struct{ path, content string }{"/etc/environment", environmentFile(env)},
			struct{ path, content string }{"/etc/profile.d/sbx.sh", profileScript(env)})
	}
	for _, f := range files {
		if err := a.put(f.path, f.content, 0o644, 0, 0); err != nil {
			return fmt.Errorf("image %q: %w", a.img.Name, err)
		}
	}
	return nil
}

// put writes a regular file at p, replacing what is there, after checking
// that no directory above p is a symbolic link.
func (a *assembler) put(p, content string, mode int64, uid, gid int) error {
	if err := a.checkParents(p); err != nil {
		return err
	}
	if e, ok := a.tree.Lookup(p); ok && e.Type == tar.TypeDir {
		return fmt.Errorf("%s is a directory in the image; a file cannot replace it", p)
	}
	e := layers.Entry{Path: p, Type: tar.TypeReg, Mode: mode, UID: uid, GID: gid, Size: int64(len(content))}
	return a.tree.Add(e, strings.NewReader(content))
}

func hostsFile(hostname string) string {
	return "127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback " + hostname + "\n"
}

// environmentFile renders env as /etc/environment (KEY=VALUE, read by
// pam_env and some init systems). That format has no quoting or escapes,
// so a value holding a newline cannot be written and is left out; the
// image description and /etc/profile.d/sbx.sh carry it.
func environmentFile(env map[string]string) string {
	var b strings.Builder
	b.WriteString("# Written by sbx from the image's env; see /etc/sbx/image.json.\n")
	for _, k := range sortedKeys(env) {
		if v := env[k]; shellName(k) && !strings.ContainsAny(v, "\n\r") {
			b.WriteString(k + "=" + v + "\n")
		}
	}
	return b.String()
}

// profileScript renders env as a shell script that login shells source.
func profileScript(env map[string]string) string {
	var b strings.Builder
	b.WriteString("# Written by sbx from the image's env.\n")
	for _, k := range sortedKeys(env) {
		if !shellName(k) {
			continue
		}
		b.WriteString("export " + k + "=" + shellQuote(env[k]) + "\n")
	}
	return b.String()
}

// shellName reports whether k can be a shell variable's name. The spec's
// names always can; a base image's configuration might hold others, which
// only the image description then carries.
func shellName(k string) bool {
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// file writes a file block.
func (a *assembler) file(f *lang.File) error {
	if err := a.put(f.Path, f.Content, int64(f.Mode), f.UID, f.GID); err != nil {
		return diags.WithSubject(fmt.Errorf("image %q: file %q: %w", a.img.Name, f.Path, err), f.DeclRange)
	}
	return nil
}

// symlinks writes the image's symlinks attribute, in path order, replacing
// whatever the base or an artifact put there unless it is a directory.
func (a *assembler) symlinks() error {
	for _, p := range sortedKeys(a.img.Symlinks) {
		target := a.img.Symlinks[p]
		err := a.checkParents(p)
		if err == nil {
			if e, ok := a.tree.Lookup(p); ok && e.Type == tar.TypeDir {
				err = fmt.Errorf("%s is a directory in the image; a symbolic link cannot replace it", p)
			}
		}
		if err == nil {
			err = a.tree.Add(layers.Entry{Path: p, Type: tar.TypeSymlink, Mode: 0o777, Linkname: target}, nil)
		}
		if err != nil {
			return diags.WithSubject(fmt.Errorf("image %q: symlink %s -> %s: %w", a.img.Name, p, target, err), a.img.DeclRange)
		}
	}
	return nil
}
