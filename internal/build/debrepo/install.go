package debrepo

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/layers"
)

// Fetched is a pinned package and the path of its verified .deb.
type Fetched struct {
	Pin  Pin
	Path string
}

// mergedDirs are the top-level directories Debian's merged /usr layout
// makes symbolic links into /usr. Packages still ship files under them;
// dpkg follows the links, and Install rewrites the paths instead, since
// the tree never follows links.
var mergedDirs = []string{"bin", "sbin", "lib", "lib64"}

// Install unpacks the data trees of pkgs into tree, sorted by package
// name, without running maintainer scripts, and records them in the dpkg
// database: /var/lib/dpkg/status (the base image's stanzas for other
// packages kept, all sorted by name), info/NAME.list and, when the
// package ships one, info/NAME.md5sums. An empty root first gets the
// merged-/usr links (/bin → usr/bin and so on); a path under a
// top-level directory that is such a link is written under /usr.
// Setuid and setgid bits and file capabilities are dropped and device
// nodes left out, as for extracted artifacts. An entry that escapes the
// root is an error naming the package. Then the alternatives the
// packages' postinst scripts install with literal arguments are linked
// (applyAlternatives), /etc/passwd and /etc/group are made from
// base-passwd's masters when the root has none (systemAccounts), and
// last /etc/ld.so.cache is written
// (LDCache) and the CA bundle rebuilt (CABundle). The same packages give
// the same tree.
func Install(ctx context.Context, tree *layers.Tree, pkgs []Fetched) error {
	pkgs = append([]Fetched(nil), pkgs...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Pin.Name < pkgs[j].Pin.Name })
	if err := mergedUsr(tree); err != nil {
		return err
	}
	status := map[string]string{}
	if r, err := tree.Open("/var/lib/dpkg/status"); err == nil {
		base, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		for _, st := range splitStanzas(string(base)) {
			if name := stanzaFields(st)["package"]; name != "" {
				status[name] = st
			}
		}
	}
	for _, dir := range []string{"/var/lib/dpkg", "/var/lib/dpkg/info"} {
		if _, ok := tree.Lookup(dir); !ok {
			if err := tree.Add(layers.Entry{Path: dir, Type: tar.TypeDir, Mode: 0o755}, nil); err != nil {
				return err
			}
		}
	}
	var alts []alternative
	for _, p := range pkgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		ctl, err := readControl(p.Path)
		if err != nil {
			return fmt.Errorf("package %s %s: %w", p.Pin.Name, p.Pin.Version, err)
		}
		f := stanzaFields(ctl["control"])
		if f["package"] != p.Pin.Name || f["version"] != p.Pin.Version {
			return fmt.Errorf("package %s %s: the .deb's control file says %s %s", p.Pin.Name, p.Pin.Version, f["package"], f["version"])
		}
		list, err := unpack(ctx, tree, p.Path)
		if err != nil {
			return fmt.Errorf("package %s %s: %w", p.Pin.Name, p.Pin.Version, err)
		}
		info := "/var/lib/dpkg/info/" + p.Pin.Name
		if err := putFile(tree, info+".list", strings.Join(list, "\n")+"\n"); err != nil {
			return err
		}
		if sums, ok := ctl["md5sums"]; ok {
			if err := putFile(tree, info+".md5sums", sums); err != nil {
				return err
			}
		}
		status[p.Pin.Name] = statusStanza(ctl["control"])
		alts = append(alts, parseAlternatives(ctl["postinst"], p.Pin.Name)...)
	}
	if err := applyAlternatives(tree, alts); err != nil {
		return err
	}
	if err := systemAccounts(tree); err != nil {
		return err
	}
	names := make([]string, 0, len(status))
	for n := range status {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(strings.TrimRight(status[n], "\n"))
		b.WriteString("\n\n")
	}
	if err := putFile(tree, "/var/lib/dpkg/status", b.String()); err != nil {
		return err
	}
	for _, p := range pkgs {
		if p.Pin.Architecture != "all" {
			if err := LDCache(tree, p.Pin.Architecture); err != nil {
				return err
			}
			break
		}
	}
	return CABundle(tree)
}

// statusStanza is a control file with "Status: install ok installed"
// after its Package line, as dpkg records an installed package.
func statusStanza(control string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(control, "\n"), "\n") {
		b.WriteString(line)
		b.WriteByte('\n')
		if strings.HasPrefix(line, "Package:") {
			b.WriteString("Status: install ok installed\n")
		}
	}
	return b.String()
}

func mergedUsr(tree *layers.Tree) error {
	for _, d := range mergedDirs {
		if _, ok := tree.Lookup("/" + d); ok {
			continue
		}
		for _, p := range []string{"/usr", "/usr/" + d} {
			if _, ok := tree.Lookup(p); !ok {
				if err := tree.Add(layers.Entry{Path: p, Type: tar.TypeDir, Mode: 0o755}, nil); err != nil {
					return err
				}
			}
		}
		if err := tree.Add(layers.Entry{Path: "/" + d, Type: tar.TypeSymlink, Mode: 0o777, Linkname: "usr/" + d}, nil); err != nil {
			return err
		}
	}
	return nil
}

// rewrite maps a package path under a merged top-level directory to its
// place under /usr. The directory itself stays (it is the link).
func rewrite(tree *layers.Tree, p string) string {
	rest := strings.TrimPrefix(p, "/")
	top, sub, _ := strings.Cut(rest, "/")
	if sub == "" {
		return p
	}
	if e, ok := tree.Lookup("/" + top); ok && e.Type == tar.TypeSymlink && e.Linkname == "usr/"+top {
		return "/usr/" + top + "/" + sub
	}
	return p
}

// unpack adds a .deb's data tree to tree and returns the paths it
// holds, as dpkg lists them ("/." first).
func unpack(ctx context.Context, tree *layers.Tree, deb string) ([]string, error) {
	list := []string{"/."}
	var links []layers.Entry
	err := archive.WalkFile(deb, func(hdr *tar.Header, body io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := archive.CheckEntry(hdr); err != nil {
			return fmt.Errorf("unsafe entry: %w", err)
		}
		name := "/" + archive.CleanName(hdr.Name)
		if name == "/" || name == "/." {
			return nil
		}
		list = append(list, name)
		e := layers.Entry{Path: rewrite(tree, name), Type: hdr.Typeflag, Mode: hdr.Mode & 0o1777, UID: hdr.Uid, GID: hdr.Gid, Linkname: hdr.Linkname}
		if e.Type == 0 {
			e.Type = tar.TypeReg
		}
		old, exists := tree.Lookup(e.Path)
		switch e.Type {
		case tar.TypeChar, tar.TypeBlock:
			return nil
		case tar.TypeLink:
			e.Linkname = rewrite(tree, "/"+archive.CleanName(hdr.Linkname))
			links = append(links, e)
			return nil
		case tar.TypeReg:
			e.Size = hdr.Size
		case tar.TypeDir:
			if exists && (old.Type == tar.TypeDir || old.Type == tar.TypeSymlink) {
				// A directory already there (or a merged-/usr link) is
				// kept as it is, as dpkg keeps it.
				return nil
			}
		case tar.TypeSymlink, tar.TypeFifo:
		default:
			return fmt.Errorf("entry %q: unsupported entry type %q", hdr.Name, hdr.Typeflag)
		}
		if exists && old.Type == tar.TypeDir && e.Type != tar.TypeDir {
			return fmt.Errorf("entry %q is a %s, but %s is a directory in the image", hdr.Name, layers.TypeName(e.Type), e.Path)
		}
		if err := tree.Add(e, body); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if err := tree.Add(l, nil); err != nil {
			return nil, fmt.Errorf("entry %q: %w", l.Path, err)
		}
	}
	return list, nil
}

func putFile(tree *layers.Tree, p, content string) error {
	return tree.Add(layers.Entry{Path: p, Type: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}, strings.NewReader(content))
}

// maxControl bounds a control member read into memory.
const maxControl = 16 << 20

// readControl returns the members of a .deb's control archive by name
// ("control", "md5sums", "postinst"…).
func readControl(deb string) (map[string]string, error) {
	f, err := os.Open(deb)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic := make([]byte, 8)
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != "!<arch>\n" {
		return nil, errors.New("not a .deb (ar) archive")
	}
	for i := 0; i < 16; i++ {
		hdr := make([]byte, 60)
		if _, err := io.ReadFull(br, hdr); err != nil {
			return nil, errors.New("the .deb has no control archive")
		}
		name := strings.TrimSuffix(strings.TrimSpace(string(hdr[:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("bad ar member header %q", hdr)
		}
		if !strings.HasPrefix(name, "control.tar") {
			if _, err := io.CopyN(io.Discard, br, size+size%2); err != nil {
				return nil, err
			}
			continue
		}
		rc, _, err := archive.Decompress(io.LimitReader(br, size))
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		out := map[string]string{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != 0 {
				continue
			}
			var b bytes.Buffer
			if _, err := io.Copy(&b, io.LimitReader(tr, maxControl)); err != nil {
				return nil, err
			}
			out[path.Base(archive.CleanName(h.Name))] = b.String()
		}
		if _, ok := out["control"]; !ok {
			return nil, errors.New("the control archive has no control file")
		}
		return out, nil
	}
	return nil, errors.New("the .deb has no control archive")
}

// CABundle writes /etc/ssl/certs/ca-certificates.crt as
// update-ca-certificates would: the certificates listed in
// /etc/ca-certificates.conf (lines not starting with "!" or "#"), or,
// without that file (its postinst writes it), every .crt under
// /usr/share/ca-certificates, sorted by path, concatenated; and the
// links update-ca-certificates makes: NAME.pem to each certificate and
// HASH.N (SubjectHash) to NAME.pem, where nothing is at those paths
// already. Nothing is written when there are no certificates.
func CABundle(tree *layers.Tree) error {
	const share = "/usr/share/ca-certificates/"
	var certs []string
	if r, err := tree.Open("/etc/ca-certificates.conf"); err == nil {
		conf, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(conf), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") || strings.Contains(line, "..") {
				continue
			}
			certs = append(certs, share+line)
		}
	} else {
		for _, p := range tree.Paths() {
			if strings.HasPrefix(p, share) && strings.HasSuffix(p, ".crt") {
				certs = append(certs, p)
			}
		}
	}
	sort.Strings(certs)
	var b bytes.Buffer
	var links []layers.Entry
	hashes := map[string]int{}
	for _, c := range certs {
		e, ok := tree.Lookup(c)
		if !ok || e.Type != tar.TypeReg {
			continue
		}
		r, err := tree.Open(c)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		b.Write(bytes.TrimRight(data, "\n"))
		b.WriteByte('\n')
		blk, _ := pem.Decode(data)
		if blk == nil {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			continue
		}
		h, err := SubjectHash(cert.RawSubject)
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(path.Base(c), ".crt") + ".pem"
		hash := fmt.Sprintf("%08x", h)
		links = append(links,
			layers.Entry{Path: "/etc/ssl/certs/" + name, Type: tar.TypeSymlink, Mode: 0o777, Linkname: c},
			layers.Entry{Path: fmt.Sprintf("/etc/ssl/certs/%s.%d", hash, hashes[hash]), Type: tar.TypeSymlink, Mode: 0o777, Linkname: name})
		hashes[hash]++
	}
	if b.Len() == 0 {
		return nil
	}
	for _, d := range []string{"/etc", "/etc/ssl", "/etc/ssl/certs"} {
		if _, ok := tree.Lookup(d); !ok {
			if err := tree.Add(layers.Entry{Path: d, Type: tar.TypeDir, Mode: 0o755}, nil); err != nil {
				return err
			}
		}
	}
	for _, l := range links {
		if _, ok := tree.Lookup(l.Path); ok {
			continue // the package or the base has its own
		}
		if err := tree.Add(l, nil); err != nil {
			return err
		}
	}
	return putFile(tree, "/etc/ssl/certs/ca-certificates.crt", b.String())
}

// systemAccounts does what base-passwd's postinst does on a new system:
// when /etc/passwd or /etc/group is missing, it is copied from
// /usr/share/base-passwd/passwd.master or group.master, so the system
// users and groups Debian packages expect (daemon, bin, sys, nogroup…)
// exist. Existing account files are left as they are.
func systemAccounts(tree *layers.Tree) error {
	for _, f := range []string{"passwd", "group"} {
		dst := "/etc/" + f
		if _, ok := tree.Lookup(dst); ok {
			continue
		}
		r, err := tree.Open("/usr/share/base-passwd/" + f + ".master")
		if err != nil {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil {
			return err
		}
		if err := putFile(tree, dst, string(data)); err != nil {
			return err
		}
	}
	return nil
}
