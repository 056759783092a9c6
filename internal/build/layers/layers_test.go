package layers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ent is a tar entry of a test layer.
type ent struct {
	name, body, link string
	typ              byte
	mode             int64
	uid, gid         int
	major, minor     int64
	xattrs           map[string]string
}

func file(name, body string) ent { return ent{name: name, body: body, typ: tar.TypeReg, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) ent {
	return ent{name: name, link: to, typ: tar.TypeSymlink, mode: 0o777}
}
func hardlink(name, to string) ent  { return ent{name: name, link: to, typ: tar.TypeLink, mode: 0o644} }
func whiteout(name string) ent      { return file(name, "") }
func withMode(e ent, m int64) ent   { e.mode = m; return e }
func owned(e ent, uid, gid int) ent { e.uid, e.gid = uid, gid; return e }

// tarOf writes entries as a tar stream with noise that flattening must
// drop: user names, assorted times, GNU format.
func tarOf(t *testing.T, ents []ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range ents {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Uname: "someone", Gname: "staff", Linkname: e.link,
			Devmajor: e.major, Devminor: e.minor,
			ModTime: time.Unix(1700000000+int64(i)*7, 0),
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		for k, v := range e.xattrs {
			if hdr.PAXRecords == nil {
				hdr.PAXRecords = map[string]string{}
			}
			hdr.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func bytesLayer(name string, b []byte) Layer {
	return Layer{Name: name, MediaType: string(types.OCIUncompressedLayer), Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

func layer(t *testing.T, name string, ents ...ent) Layer {
	return bytesLayer(name, tarOf(t, ents))
}

func flatten(t *testing.T, ls ...Layer) *Tree {
	t.Helper()
	tr, err := Flatten(ls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func output(t *testing.T, tr *Tree) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tr.WriteTar(&buf, 1234567890); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// outEntry is an entry of WriteTar's output.
type outEntry struct {
	hdr  *tar.Header
	body string
}

func readOut(t *testing.T, b []byte) []outEntry {
	t.Helper()
	var out []outEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, outEntry{hdr, string(body)})
	}
}

// summary renders output entries one a line: "name type body-or-link".
func summary(t *testing.T, tr *Tree) string {
	t.Helper()
	var lines []string
	for _, e := range readOut(t, output(t, tr)) {
		s := fmt.Sprintf("%s %c", e.hdr.Name, e.hdr.Typeflag)
		switch e.hdr.Typeflag {
		case tar.TypeReg:
			s += " " + e.body
		case tar.TypeSymlink, tar.TypeLink:
			s += " -> " + e.hdr.Linkname
		}
		lines = append(lines, s)
	}
	return strings.Join(lines, "\n")
}

func checkSummary(t *testing.T, tr *Tree, want ...string) {
	t.Helper()
	if got := summary(t, tr); got != strings.Join(want, "\n") {
		t.Errorf("flattened tree:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestWhiteouts(t *testing.T) {
	lower := layer(t, "lower",
		dir("a/"), file("a/x", "x"), file("a/y", "y"), dir("a/sub/"), file("a/sub/z", "z"),
		file("b", "b"), file("c", "c"))
	upper := layer(t, "upper",
		whiteout("a/.wh.x"), whiteout("a/.wh.sub"), whiteout(".wh.b"),
		whiteout(".wh.nothing-there"), file("d", "d"))
	checkSummary(t, flatten(t, lower, upper),
		"./ 5", "a/ 5", "a/y 0 y", "c 0 c", "d 0 d")
}

func TestWhiteoutDoesNotHideItsOwnLayer(t *testing.T) {
	lower := layer(t, "lower", file("f", "old"))
	// The whiteout comes after the new file in tar order; it still applies
	// only to the layer below.
	upper := layer(t, "upper", file("f", "new"), whiteout(".wh.f"))
	checkSummary(t, flatten(t, lower, upper), "./ 5", "f 0 new")
}

func TestOpaqueDirectory(t *testing.T) {
	lower := layer(t, "lower",
		dir("etc/"), file("etc/a", "a"), dir("etc/sub/"), file("etc/sub/b", "b"), file("keep", "k"))
	upper := layer(t, "upper",
		file("etc/new", "n"), whiteout("etc/.wh..wh..opq"), withMode(dir("etc/"), 0o700))
	tr := flatten(t, lower, upper)
	checkSummary(t, tr, "./ 5", "etc/ 5", "etc/new 0 n", "keep 0 k")
	if e, _ := tr.Lookup("/etc"); e.Mode != 0o700 {
		t.Errorf("opaque directory mode %o, want the upper layer's 0700", e.Mode)
	}
}

func TestOverride(t *testing.T) {
	lower := layer(t, "lower",
		withMode(file("bin/tool", "v1"), 0o755),
		dir("d/"), file("d/inner", "i"),
		file("f", "file"),
		dir("keep/"), file("keep/old", "o"))
	upper := layer(t, "upper",
		owned(withMode(file("bin/tool", "v2"), 0o4755), 10, 20),
		file("d", "now a file"),
		dir("f/"), file("f/child", "c"),
		owned(dir("keep/"), 5, 5), file("keep/new", "n"))
	tr := flatten(t, lower, upper)
	checkSummary(t, tr,
		"./ 5", "bin/ 5", "bin/tool 0 v2", "d 0 now a file", "f/ 5", "f/child 0 c",
		"keep/ 5", "keep/new 0 n", "keep/old 0 o")
	e, _ := tr.Lookup("/bin/tool")
	if e.Mode != 0o4755 || e.UID != 10 || e.GID != 20 || e.Size != 2 {
		t.Errorf("overridden file = %+v", e)
	}
	if e, _ := tr.Lookup("/keep"); e.UID != 5 {
		t.Errorf("directory metadata not taken from the upper layer: %+v", e)
	}
	// bin/ had no entry of its own: an implicit 0755 root-owned parent.
	if e, _ := tr.Lookup("/bin"); e.Type != tar.TypeDir || e.Mode != 0o755 || e.UID != 0 {
		t.Errorf("implicit parent = %+v", e)
	}
}

func TestHardLinksFollowTheirTargets(t *testing.T) {
	// The link's name sorts before its target's, and the layer lists the
	// link first, so the output must swap their roles.
	l := layer(t, "l",
		hardlink("a/link", "z/target"),
		hardlink("a/link2", "a/link"), // a link to a link of the same layer
		file("z/target", "shared"))
	tr := flatten(t, l)
	checkSummary(t, tr,
		"./ 5", "a/ 5", "a/link 0 shared", "a/link2 1 -> a/link", "z/ 5", "z/target 1 -> a/link")
}

func TestHardLinkKeepsContentWhenTargetChanges(t *testing.T) {
	lower := layer(t, "lower", file("orig", "v1"), hardlink("link", "orig"),
		file("other", "o"), hardlink("other2", "other"))
	// The target is deleted in one case and replaced in the other: the
	// links keep the content they shared, as overlayfs shows it.
	upper := layer(t, "upper", whiteout(".wh.orig"), file("other", "replaced"))
	checkSummary(t, flatten(t, lower, upper),
		"./ 5", "link 0 v1", "other 0 replaced", "other2 0 o")
}

func TestHardLinkErrors(t *testing.T) {
	for name, ents := range map[string][]ent{
		"missing target": {hardlink("l", "nowhere")},
		"directory":      {dir("d/"), hardlink("l", "d")},
		"cycle":          {hardlink("a", "b"), hardlink("b", "a")},
		"to itself":      {hardlink("a", "a")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Flatten([]Layer{layer(t, "sha256:abc", ents...)})
			if err == nil || !strings.Contains(err.Error(), "layer sha256:abc") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// A target whited out in the same layer that links to it was removed
	// before the link is made.
	lower := layer(t, "lower", file("t", "x"))
	upper := layer(t, "upper", whiteout(".wh.t"), hardlink("l", "t"))
	if _, err := Flatten([]Layer{lower, upper}); err == nil || !strings.Contains(err.Error(), "/t does not exist") {
		t.Errorf("link to a target whited out in its own layer: err = %v", err)
	}
}

func TestEscapingNamesRejected(t *testing.T) {
	for _, e := range []ent{
		file("/etc/passwd", "x"),
		file("../outside", "x"),
		file("a/../../outside", "x"),
		file("a/../b", "x"),
		hardlink("l", "../etc/shadow"),
		hardlink("l", "/etc/shadow"),
	} {
		l := layer(t, "sha256:bad", file("etc/shadow", "s"), e)
		_, err := Flatten([]Layer{l})
		if err == nil {
			t.Errorf("entry %q (link %q) accepted", e.name, e.link)
			continue
		}
		if !errors.Is(err, errEscape) || !strings.Contains(err.Error(), "layer sha256:bad: entry "+fmt.Sprintf("%q", e.name)) {
			t.Errorf("entry %q: err = %v", e.name, err)
		}
	}
}

func TestSymlinksAreNotFollowed(t *testing.T) {
	lower := layer(t, "lower", symlink("etc", "/host/etc"), symlink("up", "../../.."))
	// Symlinks are kept as written, whatever they point at.
	tr := flatten(t, lower)
	checkSummary(t, tr, "./ 5", "etc 2 -> /host/etc", "up 2 -> ../../..")

	upper := layer(t, "upper", file("etc/passwd", "root::0:0"))
	_, err := Flatten([]Layer{lower, upper})
	if err == nil || !strings.Contains(err.Error(), "/etc/passwd: parent /etc is a symbolic link to /host/etc, which is not followed") {
		t.Errorf("entry below a symlink: err = %v", err)
	}
	if err := tr.Add(Entry{Path: "/up/x", Type: tar.TypeReg, Mode: 0o644}, nil); err == nil {
		t.Error("Add below a symlink succeeded")
	}
	// An upper layer that replaces the link by a directory may fill it.
	fixed := layer(t, "fixed", file("etc/passwd", "p"), dir("etc/"))
	checkSummary(t, flatten(t, lower, fixed), "./ 5", "etc/ 5", "etc/passwd 0 p", "up 2 -> ../../..")
}

func TestDevicesXattrsOwnership(t *testing.T) {
	l := layer(t, "l",
		ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666, major: 1, minor: 3},
		ent{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660, gid: 6, major: 8, minor: 0},
		ent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o600, uid: 501},
		ent{name: "usr/bin/ping", typ: tar.TypeReg, body: "elf", mode: 0o4711,
			xattrs: map[string]string{"security.capability": "\x01\x00\x00\x02", "user.note": "n"}},
		withMode(dir("tmp/"), 0o1777),
	)
	out := readOut(t, output(t, flatten(t, l)))
	byName := map[string]*tar.Header{}
	for _, e := range out {
		if e.hdr.Uname != "" || e.hdr.Gname != "" {
			t.Errorf("%s: uname %q gname %q, want empty", e.hdr.Name, e.hdr.Uname, e.hdr.Gname)
		}
		if !e.hdr.ModTime.Equal(time.Unix(1234567890, 0)) {
			t.Errorf("%s: mtime %v, want the epoch", e.hdr.Name, e.hdr.ModTime)
		}
		if e.hdr.Format != tar.FormatPAX && e.hdr.Format != tar.FormatUSTAR {
			t.Errorf("%s: format %v", e.hdr.Name, e.hdr.Format)
		}
		byName[e.hdr.Name] = e.hdr
	}
	if h := byName["dev/null"]; h == nil || h.Typeflag != tar.TypeChar || h.Devmajor != 1 || h.Devminor != 3 || h.Mode != 0o666 {
		t.Errorf("dev/null = %+v", h)
	}
	if h := byName["dev/sda"]; h == nil || h.Typeflag != tar.TypeBlock || h.Devmajor != 8 || h.Gid != 6 || h.Mode != 0o660 {
		t.Errorf("dev/sda = %+v", h)
	}
	if h := byName["run/fifo"]; h == nil || h.Typeflag != tar.TypeFifo || h.Uid != 501 {
		t.Errorf("run/fifo = %+v", h)
	}
	if h := byName["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v", h)
	}
	h := byName["usr/bin/ping"]
	if h == nil || h.Mode != 0o4711 || h.PAXRecords["SCHILY.xattr.security.capability"] != "\x01\x00\x00\x02" ||
		h.PAXRecords["SCHILY.xattr.user.note"] != "n" {
		t.Errorf("usr/bin/ping = %+v", h)
	}
}

func TestStableOutput(t *testing.T) {
	base := []ent{
		dir("etc/"), file("etc/hostname", "box"), file("etc/os-release", "ID=test"),
		withMode(dir("root/"), 0o700), file("a.b", "dot"), dir("a/"), file("a/b", "slash"),
		symlink("bin", "usr/bin"), dir("usr/"), dir("usr/bin/"), withMode(file("usr/bin/sh", "sh"), 0o755),
		hardlink("usr/bin/ash", "usr/bin/sh"),
		ent{name: "dev/console", typ: tar.TypeChar, mode: 0o600, major: 5, minor: 1},
	}
	upper := []ent{whiteout("etc/.wh.hostname"), file("etc/motd", "hi"), whiteout("a/.wh..wh..opq"), file("a/c", "c")}
	want := output(t, flatten(t, layer(t, "1", base...), layer(t, "2", upper...)))
	if again := output(t, flatten(t, layer(t, "1", base...), layer(t, "2", upper...))); !bytes.Equal(again, want) {
		t.Fatal("same layers gave different bytes")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		b, u := slices.Clone(base), slices.Clone(upper)
		rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		rng.Shuffle(len(u), func(i, j int) { u[i], u[j] = u[j], u[i] })
		if got := output(t, flatten(t, layer(t, "1", b...), layer(t, "2", u...))); !bytes.Equal(got, want) {
			t.Fatalf("shuffle %d: different bytes\n%v\n%v", i, b, u)
		}
	}
	// Parents come before children and a directory's subtree is
	// contiguous: "a/" and its entries, then "a.b".
	var names []string
	for _, e := range readOut(t, want) {
		names = append(names, e.hdr.Name)
	}
	wantNames := []string{"./", "a/", "a/c", "a.b", "bin", "dev/", "dev/console", "etc/", "etc/motd", "etc/os-release",
		"root/", "usr/", "usr/bin/", "usr/bin/ash", "usr/bin/sh"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("order:\n%v\nwant\n%v", names, wantNames)
	}
	// The other epoch changes the bytes: the time is really the one given.
	var other bytes.Buffer
	tr := flatten(t, layer(t, "1", base...))
	if err := tr.WriteTar(&other, 0); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.Bytes(), output(t, tr)) {
		t.Error("epoch has no effect on the output")
	}
}

// ggcrLayer makes a compressed layer with go-containerregistry, as a
// registry would serve it.
func ggcrLayer(t *testing.T, raw []byte, c compression.Compression) Layer {
	t.Helper()
	mt := types.OCILayer
	if c == compression.ZStd {
		mt = types.OCILayerZStd
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithCompression(c), tarball.WithMediaType(mt))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := l.Digest()
	return Layer{Name: d.String(), MediaType: string(mt), Open: l.Compressed}
}

func TestCompressions(t *testing.T) {
	raw := tarOf(t, []ent{dir("x/"), file("x/f", strings.Repeat("data ", 1000))})
	want := output(t, flatten(t, bytesLayer("plain", raw)))
	for _, c := range []compression.Compression{compression.GZip, compression.ZStd} {
		l := ggcrLayer(t, raw, c)
		rc, err := l.Open()
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		io.ReadFull(rc, head)
		rc.Close()
		if bytes.HasPrefix(raw, head) {
			t.Errorf("%s layer is not compressed", c)
		}
		if got := output(t, flatten(t, l)); !bytes.Equal(got, want) {
			t.Errorf("%s layer flattens differently from the plain tar", c)
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	docker := Layer{Name: "docker", MediaType: string(types.DockerLayer), Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz.Bytes())), nil
	}}
	if got := output(t, flatten(t, docker)); !bytes.Equal(got, want) {
		t.Error("Docker gzip layer flattens differently")
	}
	cfg := bytesLayer("cfg", raw)
	cfg.MediaType = string(types.OCIConfigJSON)
	if _, err := Flatten([]Layer{cfg}); err == nil || !strings.Contains(err.Error(), "is not a tar layer") {
		t.Errorf("config media type as a layer: err = %v", err)
	}
	// A truncated compressed layer is an error, not a shorter tree.
	l := ggcrLayer(t, raw, compression.GZip)
	rc, _ := l.Open()
	full, _ := io.ReadAll(rc)
	short := bytesLayer("short", full[:len(full)/2])
	if _, err := Flatten([]Layer{short}); err == nil || !strings.Contains(err.Error(), "layer short") {
		t.Errorf("truncated layer: err = %v", err)
	}
}

func TestAgreesWithGoContainerRegistryExtract(t *testing.T) {
	// Random layers of files and directories with whiteouts and opaque
	// markers, flattened here and by mutate.Extract: the same paths must
	// hold the same contents.
	rng := rand.New(rand.NewPCG(7, 9))
	var imgLayers []v1.Layer
	var ours []Layer
	names := []string{"a", "b", "c", "d"}
	for li := range 6 {
		var ents []ent
		seen := map[string]bool{}
		for range 25 {
			// Names at depth two are files, "sub" is always a directory.
			p := names[rng.IntN(4)] + "/" + names[rng.IntN(4)]
			if rng.IntN(3) == 0 {
				p = names[rng.IntN(4)] + "/sub/" + names[rng.IntN(4)]
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			dirName, base := split(p)
			switch rng.IntN(12) {
			case 0, 2:
				if li > 0 {
					ents = append(ents, whiteout(dirName+"/.wh."+base))
					continue
				}
			case 1:
				if li > 0 {
					ents = append(ents, whiteout(dirName+"/.wh..wh..opq"))
					continue
				}
			}
			ents = append(ents, file(p, fmt.Sprintf("layer %d %s", li, p)))
		}
		// Parents first, as real layers have them (Extract needs that).
		var withDirs []ent
		made := map[string]bool{}
		for _, e := range ents {
			d, _ := split(e.name)
			var parts []string
			for _, c := range strings.Split(d, "/") {
				parts = append(parts, c)
				pd := strings.Join(parts, "/")
				if !made[pd] {
					made[pd] = true
					withDirs = append(withDirs, dir(pd+"/"))
				}
			}
			withDirs = append(withDirs, e)
		}
		raw := tarOf(t, withDirs)
		l := ggcrLayer(t, raw, compression.GZip)
		ours = append(ours, l)
		gl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
		if err != nil {
			t.Fatal(err)
		}
		imgLayers = append(imgLayers, gl)
	}
	img, err := mutate.AppendLayers(empty.Image, imgLayers...)
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string]string{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			theirs[strings.TrimPrefix(hdr.Name, "./")] = string(b)
		}
	}
	mine := map[string]string{}
	for _, e := range readOut(t, output(t, flatten(t, ours...))) {
		if e.hdr.Typeflag == tar.TypeReg {
			mine[e.hdr.Name] = e.body
		}
	}
	if len(mine) == 0 {
		t.Fatal("no files survived")
	}
	for p, b := range theirs {
		if mine[p] != b {
			t.Errorf("%s: ours %q, mutate.Extract %q", p, mine[p], b)
		}
	}
	for p := range mine {
		if _, ok := theirs[p]; !ok {
			t.Errorf("%s: only in ours", p)
		}
	}
}

func TestAddRemoveOpen(t *testing.T) {
	tr := flatten(t, layer(t, "base", dir("usr/"), dir("usr/local/"), file("etc/motd", "base")))
	if err := tr.Add(Entry{Path: "/usr/local/bin/claude", Type: tar.TypeReg, Mode: 0o755, Size: 5}, strings.NewReader("claude")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(Entry{Path: "/etc/motd", Type: tar.TypeReg, Mode: 0o644, Size: 8}, strings.NewReader("sandbox\n")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(Entry{Path: "/usr/bin/c", Type: tar.TypeLink, Linkname: "/usr/local/bin/claude"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tr.Remove("/usr/local"); err != nil {
		t.Fatal(err)
	}
	checkSummary(t, tr, "./ 5", "etc/ 5", "etc/motd 0 sandbox\n", "usr/ 5", "usr/bin/ 5", "usr/bin/c 0 claud")
	r, err := tr.Open("/etc/motd")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != "sandbox\n" {
		t.Errorf("Open = %q", b)
	}
	if !slices.Equal(tr.Paths(), []string{"/", "/etc", "/etc/motd", "/usr", "/usr/bin", "/usr/bin/c"}) {
		t.Errorf("Paths = %v", tr.Paths())
	}
	for _, bad := range []Entry{
		{Path: "relative", Type: tar.TypeReg},
		{Path: "/a/../b", Type: tar.TypeReg},
		{Path: "/x", Type: tar.TypeReg, Size: 10},
		{Path: "/", Type: tar.TypeReg},
		{Path: "/l", Type: tar.TypeLink, Linkname: "/nope"},
		{Path: "/s", Type: tar.TypeSymlink},
		{Path: "/w", Type: 'Z'},
	} {
		if err := tr.Add(bad, strings.NewReader("short")); err == nil {
			t.Errorf("Add(%+v) succeeded", bad)
		}
	}
	if err := tr.Remove("/"); err == nil {
		t.Error("Remove(/) succeeded")
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.WriteTar(io.Discard, 0); err == nil {
		t.Error("WriteTar after Close succeeded")
	}
}

func TestLargeFilesSpill(t *testing.T) {
	// Contents pass through the spill file, not memory: a 32 MiB file
	// comes back whole and the tree's own index stays tiny.
	big := strings.Repeat("0123456789abcdef", 2<<20)
	tr := flatten(t, layer(t, "big", file("big", big), file("small", "s")))
	r, err := tr.Open("/big")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	if string(b) != big {
		t.Fatal("large file content changed")
	}
	if fi, err := tr.spill.Stat(); err != nil || fi.Size() < int64(len(big)) {
		t.Errorf("spill file size %v, %v", fi, err)
	}
}

// TestLimits checks that a tree stops taking in content at its limits: a
// file whose header claims more bytes than are left is refused before any
// is written, and a layer of more entries than allowed stops at the limit.
func TestLimits(t *testing.T) {
	tr, err := NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.SetLimits(Limits{Bytes: 10, Entries: 4})
	if err := tr.Add(Entry{Path: "/a", Type: tar.TypeReg, Size: 6}, strings.NewReader("123456")); err != nil {
		t.Fatal(err)
	}
	err = tr.Add(Entry{Path: "/b", Type: tar.TypeReg, Size: 5}, strings.NewReader("12345"))
	var le *LimitError
	if !errors.As(err, &le) || le.Entries || le.Limit != 10 || !strings.Contains(err.Error(), "/b") {
		t.Errorf("6 + 5 bytes with a limit of 10: err = %v", err)
	}
	if _, ok := tr.Lookup("/b"); ok {
		t.Error("/b was added past the limit")
	}
	ents := []ent{dir("d/"), file("d/1", ""), file("d/2", ""), file("d/3", "")}
	err = tr.Apply(layer(t, "many", ents...))
	if !errors.As(err, &le) || !le.Entries || le.Limit != 4 || !strings.Contains(err.Error(), "layer many") {
		t.Errorf("entries past the limit: err = %v", err)
	}
}
