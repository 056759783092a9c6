package rootfs

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"github.com/sbx-dev/sbx/lang"
)

// An Alpine-like base in two layers; the second deletes /etc/os-release
// with a whiteout and replaces /etc/motd.
func baseLayers(t testing.TB) [][]byte {
	l1 := tarOf(t,
		dirEnt("bin/", 0o755),
		fileEnt("bin/busybox", 0o755, 0, 0, "busybox binary"),
		linkEnt("bin/ash", "bin/busybox"),
		symEnt("bin/sh", "/bin/busybox"),
		dirEnt("etc/", 0o755),
		fileEnt("etc/passwd", 0o644, 0, 0, "root:x:0:0:root:/root:/bin/ash\nbin:x:1:1:bin:/bin:/sbin/nologin\n"),
		fileEnt("etc/group", 0o644, 0, 0, "root:x:0:root\nwheel:x:10:root\nshadow:x:42:\nusers:x:100:games\n"),
		fileEnt("etc/shadow", 0o640, 0, 42, "root:*::0:::::\nbin:!::0:::::\n"),
		fileEnt("etc/os-release", 0o644, 0, 0, "ID=alpine\n"),
		fileEnt("etc/motd", 0o644, 0, 0, "Welcome to Alpine!\n"),
		dirEnt("usr/", 0o755),
		dirEnt("usr/bin/", 0o755),
		fileEnt("usr/bin/passwd", 0o4755, 0, 0, "setuid passwd"),
		dirEnt("tmp/", 0o1777),
	)
	l2 := tarOf(t,
		dirEnt("etc/", 0o755),
		fileEnt("etc/.wh.os-release", 0o644, 0, 0, ""),
		fileEnt("etc/motd", 0o644, 0, 0, "layer two motd\n"),
	)
	return [][]byte{l1, l2}
}

// npmTarball is an npm package tarball, entries under package/.
func npmTarball(t testing.TB) []byte {
	return gz(t, tarOf(t,
		fileEnt("package/package.json", 0o644, 0, 0, `{"name":"claude"}`),
		fileEnt("package/claude", 0o755, 0, 0, "#!claude binary\n"),
		fileEnt("package/README.md", 0o644, 0, 0, "# readme\n"),
	))
}

// appTarball is a release tarball with owners, setuid, links and an
// extended attribute, to extract.
func appTarball(t testing.TB) []byte {
	ping := fileEnt("bin/ping", 0o755, 0, 0, "ping binary")
	ping.hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00"}
	return gz(t, tarOf(t,
		dirEnt("./", 0o755),
		dirEnt("./bin/", 0o755),
		fileEnt("./bin/app", 0o750, 1000, 1000, "app binary"),
		fileEnt("./bin/helper", 0o4755, 0, 0, "setuid helper"),
		linkEnt("./bin/app-hard", "bin/app"),
		symEnt("./bin/app-sym", "app"),
		ping,
		dirEnt("./share/", 0o700),
		fileEnt("./share/data", 0o600, 1000, 1000, "data"),
	))
}

// toolDeb is a Debian package with files under usr/.
func toolDeb(t testing.TB) []byte {
	return archivetest.Deb(t, "Package: tool\nVersion: 1.0\nArchitecture: amd64\n", archive.Xz,
		archivetest.Entry{Name: "./", Mode: 0o755},
		archivetest.Entry{Name: "./usr/", Mode: 0o755},
		archivetest.Entry{Name: "./usr/bin/", Mode: 0o755},
		archivetest.Entry{Name: "./usr/bin/debtool", Body: "deb tool", Mode: 0o755},
		archivetest.Entry{Name: "./usr/bin/debtool-alias", Type: tar.TypeSymlink, Linkname: "debtool", Mode: 0o777},
		archivetest.Entry{Name: "./usr/share/", Mode: 0o755},
		archivetest.Entry{Name: "./usr/share/debtool/", Mode: 0o755},
		archivetest.Entry{Name: "./usr/share/debtool/conf", Body: "conf\n", Mode: 0o644},
	)
}

const rawTool = "\x7fELF raw tool download"

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// agentSpec declares an image using every kind of input. The artifacts
// and users are declared out of name order on purpose.
func agentSpec() string {
	return `
image "agent" {
  base = "alpine:3.23"
  env  = { EDITOR = "vi", MULTI = "a\nb", QUOTE = "it's" }

  artifact "tool" {
    source = "https://downloads.example.com/tool"
    sha256 = "` + sha(rawTool) + `"
    dest   = "/usr/local/bin/tool"
    mode   = "0750"
    gid    = 10
  }
  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.332"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
  }
  artifact "readme" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.332"
    file   = "package/README.md"
    dest   = "/usr/share/doc/claude/README.md"
  }
  artifact "app" {
    source       = "https://downloads.example.com/app.tar.gz"
    sha256       = "` + strings.Repeat("a", 64) + `"
    dest         = "/opt/app"
    extract      = true
    keep_special = true
  }
  artifact "debtool" {
    source  = "deb:tool=1.0"
    dest    = "/"
    extract = true
  }
  artifact "dotfile" {
    source = "https://downloads.example.com/tool"
    sha256 = "` + sha(rawTool) + `"
    dest   = "/home/agent/.config/tool/config"
  }

  user "bob" {
    uid   = 502
    gid   = 100
    home  = "/srv/bob"
    shell = "/bin/ash"
  }
  user "agent" {
    uid    = 501
    groups = ["wheel", "sbxdev"]
  }

  symlinks = {
    "/usr/local/bin/ash-link" = "/bin/ash"
    "/bin/sh"                 = "ash"
  }

  file "/etc/motd" {
    content = "sbx eval sandbox\n"
  }
  file "/etc/sbx/id" {
    content = "secret-free id\n"
    mode    = "0600"
    uid     = 501
    gid     = 501
  }
}
`
}

func agentInputs(t testing.TB) Inputs {
	dir := t.TempDir()
	npm := fileInput(t, dir, lang.SourceNPM, npmTarball(t))
	raw := fileInput(t, dir, lang.SourceURL, []byte(rawTool))
	return Inputs{
		"base":             ociInput(t, dir, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "EDITOR=nano"}, baseLayers(t)...),
		"artifact.claude":  npm,
		"artifact.readme":  npm,
		"artifact.tool":    raw,
		"artifact.dotfile": raw,
		"artifact.app":     fileInput(t, dir, lang.SourceURL, appTarball(t)),
		"artifact.debtool": fileInput(t, dir, lang.SourceDeb, toolDeb(t)),
	}
}

func TestAssemble(t *testing.T) {
	img := loadImage(t, agentSpec())
	b := assembleTar(t, img, agentInputs(t), Options{InputHash: "sha256:" + strings.Repeat("0", 64)})
	files, order := readTar(t, b)

	type meta struct {
		typ      byte
		mode     int64
		uid, gid int
		body     string
		link     string
	}
	want := map[string]meta{
		// Base, flattened.
		// Hard-linked paths: the first in path order holds the content.
		"/bin/ash":     {typ: tar.TypeReg, mode: 0o755, body: "busybox binary"},
		"/bin/busybox": {typ: tar.TypeLink, mode: 0o755, link: "bin/ash"},
		// The base's /bin/sh -> /bin/busybox, replaced by the symlinks attribute.
		"/bin/sh":                 {typ: tar.TypeSymlink, mode: 0o777, link: "ash"},
		"/usr/local/bin/ash-link": {typ: tar.TypeSymlink, mode: 0o777, link: "/bin/ash"},
		"/usr/bin/passwd":         {typ: tar.TypeReg, mode: 0o4755, body: "setuid passwd"},
		"/tmp":                    {typ: tar.TypeDir, mode: 0o1777},
		// Standard directories the base lacked.
		"/root":          {typ: tar.TypeDir, mode: 0o700},
		"/proc":          {typ: tar.TypeDir, mode: 0o555},
		"/var/tmp":       {typ: tar.TypeDir, mode: 0o1777},
		"/etc/ssl/certs": {typ: tar.TypeDir, mode: 0o755},
		// Single files: mode from the archive entry or the spec.
		"/usr/local/bin/claude":           {typ: tar.TypeReg, mode: 0o755, body: "#!claude binary\n"},
		"/usr/share/doc/claude/README.md": {typ: tar.TypeReg, mode: 0o644, body: "# readme\n"},
		"/usr/local/bin/tool":             {typ: tar.TypeReg, mode: 0o750, gid: 10, body: rawTool},
		"/usr/local":                      {typ: tar.TypeDir, mode: 0o755},
		// An extracted tarball keeps modes, owners and links.
		"/opt/app":              {typ: tar.TypeDir, mode: 0o755},
		"/opt/app/bin/app":      {typ: tar.TypeReg, mode: 0o750, uid: 1000, gid: 1000, body: "app binary"},
		"/opt/app/bin/app-hard": {typ: tar.TypeLink, mode: 0o750, uid: 1000, gid: 1000, link: "opt/app/bin/app"},
		"/opt/app/bin/app-sym":  {typ: tar.TypeSymlink, mode: 0o777, link: "app"},
		"/opt/app/bin/helper":   {typ: tar.TypeReg, mode: 0o4755, body: "setuid helper"},
		"/opt/app/share":        {typ: tar.TypeDir, mode: 0o700},
		"/opt/app/share/data":   {typ: tar.TypeReg, mode: 0o600, uid: 1000, gid: 1000, body: "data"},
		// An extracted .deb: its data tree.
		"/usr/bin/debtool":        {typ: tar.TypeReg, mode: 0o755, body: "deb tool"},
		"/usr/bin/debtool-alias":  {typ: tar.TypeSymlink, mode: 0o777, link: "debtool"},
		"/usr/share/debtool/conf": {typ: tar.TypeReg, mode: 0o644, body: "conf\n"},
		// Homes: created, or made the user's when an artifact made them.
		"/home/agent":                     {typ: tar.TypeDir, mode: 0o700, uid: 501, gid: 501},
		"/home/agent/.config":             {typ: tar.TypeDir, mode: 0o755},
		"/home/agent/.config/tool/config": {typ: tar.TypeReg, mode: 0o644, body: rawTool},
		"/srv/bob":                        {typ: tar.TypeDir, mode: 0o700, uid: 502, gid: 100},
		// Accounts.
		"/etc/passwd": {typ: tar.TypeReg, mode: 0o644, body: "root:x:0:0:root:/root:/bin/ash\nbin:x:1:1:bin:/bin:/sbin/nologin\n" +
			"agent:x:501:501::/home/agent:/bin/sh\nbob:x:502:100::/srv/bob:/bin/ash\n"},
		"/etc/group": {typ: tar.TypeReg, mode: 0o644, body: "root:x:0:root\nwheel:x:10:root,agent\nshadow:x:42:\nusers:x:100:games\n" +
			"agent:x:501:\nsbxdev:x:1000:agent\n"},
		"/etc/shadow": {typ: tar.TypeReg, mode: 0o640, gid: 42, body: "root:*::0:::::\nbin:!::0:::::\n" +
			"agent:!::0:99999:7:::\nbob:!::0:99999:7:::\n"},
		// sbx's /etc files, and file blocks over base files.
		"/etc/hostname":    {typ: tar.TypeReg, mode: 0o644, body: "agent\n"},
		"/etc/hosts":       {typ: tar.TypeReg, mode: 0o644, body: "127.0.0.1\tlocalhost agent\n::1\tlocalhost ip6-localhost ip6-loopback agent\n"},
		"/etc/resolv.conf": {typ: tar.TypeReg, mode: 0o644, body: "nameserver 10.83.0.1\n"},
		"/etc/motd":        {typ: tar.TypeReg, mode: 0o644, body: "sbx eval sandbox\n"},
		"/etc/sbx/id":      {typ: tar.TypeReg, mode: 0o600, uid: 501, gid: 501, body: "secret-free id\n"},
		"/etc/environment": {typ: tar.TypeReg, mode: 0o644, body: "# Written by sbx from the image's env; see /etc/sbx/image.json.\n" +
			"EDITOR=vi\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nQUOTE=it's\n"},
		"/etc/profile.d/sbx.sh": {typ: tar.TypeReg, mode: 0o644, body: "# Written by sbx from the image's env.\n" +
			"export EDITOR='vi'\nexport MULTI='a\nb'\nexport PATH='/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'\nexport QUOTE='it'\\''s'\n"},
	}
	for p, w := range want {
		f, ok := files[p]
		if !ok {
			t.Errorf("%s: missing", p)
			continue
		}
		got := meta{typ: f.hdr.Typeflag, mode: f.hdr.Mode, uid: f.hdr.Uid, gid: f.hdr.Gid, body: f.body, link: f.hdr.Linkname}
		if f.hdr.Typeflag == tar.TypeLink {
			// A hard link's entry carries no metadata of its own: take
			// the target's.
			tgt := files["/"+f.hdr.Linkname]
			got.mode, got.uid, got.gid = tgt.hdr.Mode, tgt.hdr.Uid, tgt.hdr.Gid
		}
		if d := cmp.Diff(w, got, cmp.AllowUnexported(meta{})); d != "" {
			t.Errorf("%s (-want +got):\n%s", p, d)
		}
	}
	if _, ok := files["/etc/os-release"]; ok {
		t.Error("/etc/os-release survived the whiteout in the second layer")
	}
	if x := files["/opt/app/bin/ping"].hdr; x == nil || x.PAXRecords["SCHILY.xattr.security.capability"] != "\x01\x00\x00\x02\x00\x20\x00\x00" {
		t.Errorf("/opt/app/bin/ping lost its security.capability attribute: %+v", x)
	}
	// Parents come before children, hard links after their targets.
	seen := map[string]bool{}
	for _, p := range order {
		if p != "/" && !seen[filepath.Dir(p)] {
			t.Errorf("%s comes before its directory", p)
		}
		if h := files[p].hdr; h.Typeflag == tar.TypeLink && !seen["/"+h.Linkname] {
			t.Errorf("hard link %s comes before its target %s", p, h.Linkname)
		}
		seen[p] = true
	}

	info, err := imageinfo.Parse([]byte(files[imageinfo.Path].body))
	if err != nil {
		t.Fatal(err)
	}
	wantInfo := &imageinfo.Info{
		Version: 1, Name: "agent", Platform: "linux/amd64", InputHash: "sha256:" + strings.Repeat("0", 64), Hostname: "agent",
		Env: map[string]string{"EDITOR": "vi", "MULTI": "a\nb", "QUOTE": "it's", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Users: []imageinfo.User{
			{Name: "agent", UID: 501, GID: 501, Home: "/home/agent", Shell: "/bin/sh", Groups: []string{"wheel", "sbxdev"}},
			{Name: "bob", UID: 502, GID: 100, Home: "/srv/bob", Shell: "/bin/ash"},
		},
		Network: imageinfo.Network{Address: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: []string{"10.83.0.1"}, MTU: 1500},
		CACert:  "/etc/sbx/ca.crt",
	}
	if d := cmp.Diff(wantInfo, info); d != "" {
		t.Errorf("%s (-want +got):\n%s", imageinfo.Path, d)
	}
}

// TestEmptyBase builds an image with no base: the standard directories and
// root's accounts are created from nothing.
func TestEmptyBase(t *testing.T) {
	img := loadImage(t, `
image "agent" {
  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.332"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0700"
    uid    = 501
    gid    = 501
  }
  user "agent" {
    uid    = 501
    groups = ["wheel"]
  }
}
`)
	in := Inputs{"artifact.claude": fileInput(t, t.TempDir(), lang.SourceNPM, npmTarball(t))}
	files, _ := readTar(t, assembleTar(t, img, in, Options{Hostname: "eval-1.example.com"}))
	for _, d := range []struct {
		path string
		mode int64
	}{{"/", 0o755}, {"/dev", 0o755}, {"/etc", 0o755}, {"/etc/sbx", 0o755}, {"/etc/ssl/certs", 0o755}, {"/proc", 0o555},
		{"/root", 0o700}, {"/run", 0o755}, {"/sys", 0o555}, {"/tmp", 0o1777}, {"/var/tmp", 0o1777}} {
		h := files[d.path].hdr
		if h == nil || h.Typeflag != tar.TypeDir || h.Mode != d.mode || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: got %+v, want a directory %o owned by root", d.path, h, d.mode)
		}
	}
	for p, want := range map[string]string{
		"/etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nagent:x:501:501::/home/agent:/bin/sh\n",
		"/etc/group":    "root:x:0:\nagent:x:501:\nwheel:x:1000:agent\n",
		"/etc/shadow":   "root:*::0:99999:7:::\nagent:!::0:99999:7:::\n",
		"/etc/hostname": "eval-1.example.com\n",
	} {
		if got := files[p].body; got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if h := files["/etc/shadow"].hdr; h.Mode != 0o600 || h.Gid != 0 {
		t.Errorf("/etc/shadow without a shadow group: mode %o gid %d, want 0600 root", h.Mode, h.Gid)
	}
	if h := files["/usr/local/bin/claude"].hdr; h.Mode != 0o700 || h.Uid != 501 || h.Gid != 501 {
		t.Errorf("claude: mode %o owner %d:%d, want 0700 501:501", h.Mode, h.Uid, h.Gid)
	}
	for _, p := range []string{"/etc/environment", "/etc/profile.d/sbx.sh"} {
		if _, ok := files[p]; ok {
			t.Errorf("%s written for an empty environment", p)
		}
	}
}

// TestOCIArtifact takes one file from, and unpacks all of, an OCI image.
func TestOCIArtifact(t *testing.T) {
	img := loadImage(t, `
image "agent" {
  artifact "node" {
    source  = "node:22-alpine"
    dest    = "/opt/node"
    extract = true
  }
  artifact "npx" {
    source = "node:22-alpine"
    file   = "usr/local/bin/n*x"
    dest   = "/usr/bin/npx"
  }
}
`)
	dir := t.TempDir()
	node := ociInput(t, dir, nil,
		tarOf(t, dirEnt("usr/", 0o755), fileEnt("usr/local/bin/node", 0o755, 0, 0, "node v22"), fileEnt("usr/local/bin/npx", 0o755, 0, 0, "npx old"),
			fileEnt("usr/local/lib/gone", 0o644, 0, 0, "deleted above")),
		tarOf(t, fileEnt("usr/local/lib/.wh.gone", 0o644, 0, 0, ""), fileEnt("usr/local/bin/npx", 0o750, 0, 0, "npx new"),
			linkEnt("usr/local/bin/nodejs", "usr/local/bin/node")),
	)
	files, _ := readTar(t, assembleTar(t, img, Inputs{"artifact.node": node, "artifact.npx": node}, Options{}))
	if f := files["/usr/bin/npx"]; f.hdr == nil || f.body != "npx new" || f.hdr.Mode != 0o755 {
		t.Errorf("/usr/bin/npx: %+v %q, want the top layer's npx, mode 0755", f.hdr, f.body)
	}
	if f := files["/opt/node/usr/local/bin/node"]; f.body != "node v22" {
		t.Errorf("/opt/node/usr/local/bin/node = %q", f.body)
	}
	if f := files["/opt/node/usr/local/bin/nodejs"]; f.hdr == nil || f.hdr.Typeflag != tar.TypeLink || f.hdr.Linkname != "opt/node/usr/local/bin/node" {
		t.Errorf("/opt/node/usr/local/bin/nodejs: %+v, want a hard link to the node binary", f.hdr)
	}
	if _, ok := files["/opt/node/usr/local/lib/gone"]; ok {
		t.Error("a file the image's top layer deletes was extracted")
	}
}

// TestReproducible: the same inputs give the same bytes whatever the
// declaration order; a changed mode changes them.
func TestReproducible(t *testing.T) {
	in := agentInputs(t)
	spec := agentSpec()
	a := assembleTar(t, loadImage(t, spec), in, Options{})
	b := assembleTar(t, loadImage(t, spec), in, Options{})
	if sha(string(a)) != sha(string(b)) {
		t.Fatal("two assemblies of one image differ")
	}

	// Declare the users in the other order: the canonical order is the
	// same, so are the bytes.
	bob := spec[strings.Index(spec, `  user "bob"`):strings.Index(spec, `  user "agent"`)]
	reordered := strings.Replace(spec, bob, "", 1)
	reordered = strings.Replace(reordered, `  file "/etc/motd"`, bob+`  file "/etc/motd"`, 1)
	if reordered == spec {
		t.Fatal("the spec was not reordered")
	}
	if c := assembleTar(t, loadImage(t, reordered), in, Options{}); sha(string(c)) != sha(string(a)) {
		t.Error("declaring users in another order changed the image")
	}

	moded := strings.Replace(spec, `mode   = "0750"`, `mode   = "0755"`, 1)
	if moded == spec {
		t.Fatal("the mode was not changed")
	}
	c := assembleTar(t, loadImage(t, moded), in, Options{})
	if sha(string(c)) == sha(string(a)) {
		t.Fatal("changing an artifact's mode did not change the image")
	}
	files, _ := readTar(t, c)
	if m := files["/usr/local/bin/tool"].hdr.Mode; m != 0o755 {
		t.Errorf("tool mode %o, want 0755", m)
	}
}

func TestAssembleErrors(t *testing.T) {
	dir := t.TempDir()
	npm := fileInput(t, dir, lang.SourceNPM, npmTarball(t))
	const npmSrc = `source = "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.332"`
	linkedBase := ociInput(t, dir, nil, tarOf(t,
		dirEnt("usr/", 0o755),
		dirEnt("opt/", 0o755),
		symEnt("usr/local", "/opt/local"),
		symEnt("bin", "usr/bin"),
		dirEnt("etc/", 0o755),
		fileEnt("etc/passwd", 0o644, 0, 0, "root:x:0:0:root:/root:/bin/sh\ndaemon:x:501:501::/:/sbin/nologin\nagent:x:1000:1000::/home/agent:/bin/sh\n"),
		fileEnt("etc/group", 0o644, 0, 0, "root:x:0:\nagent:x:1000:\n"),
	))
	unsafe := func(e ent) fetch.Fetched {
		return fileInput(t, dir, lang.SourceURL, gz(t, tarOf(t, fileEnt("ok", 0o644, 0, 0, "fine"), e)))
	}
	binDeb := fileInput(t, dir, lang.SourceDeb, archivetest.Deb(t, "Package: bb\n", archive.Gzip,
		archivetest.Entry{Name: "./bin/", Mode: 0o755},
		archivetest.Entry{Name: "./bin/busybox", Body: "bb", Mode: 0o755}))

	for _, c := range []struct {
		name   string
		spec   string
		inputs map[string]fetch.Fetched
		want   []string
	}{
		{
			name: "missing file",
			spec: `artifact "claude" {
    ` + npmSrc + `
    file = "package/cladue"
    dest = "/usr/bin/claude"
  }`,
			inputs: map[string]fetch.Fetched{"artifact.claude": npm},
			want:   []string{`agent.hcl:2`, `artifact "claude"`, npm.File.Path, `"package/cladue"`, "package/claude"},
		},
		{
			name: "dest through a symlink",
			spec: `base = "alpine:3.23"
  artifact "claude" {
    ` + npmSrc + `
    file = "package/claude"
    dest = "/usr/local/bin/claude"
  }`,
			inputs: map[string]fetch.Fetched{"base": linkedBase, "artifact.claude": npm},
			want:   []string{`artifact "claude"`, "/usr/local/bin/claude", "/usr/local", "symbolic link to /opt/local"},
		},
		{
			name: "uid taken",
			spec: `base = "alpine:3.23"
  user "agent2" { uid = 501 }`,
			inputs: map[string]fetch.Fetched{"base": linkedBase},
			want:   []string{`agent.hcl:3`, `user "agent2"`, "uid 501", "daemon"},
		},
		{
			name: "name with another uid",
			spec: `base = "alpine:3.23"
  user "agent" { uid = 501 }`,
			inputs: map[string]fetch.Fetched{"base": linkedBase},
			want:   []string{`user "agent"`, "uid 1000, not 501"},
		},
		{
			name: "group with another gid",
			spec: `base = "alpine:3.23"
  user "agent" {
    uid = 1000
    gid = 1001
  }`,
			inputs: map[string]fetch.Fetched{"base": linkedBase},
			want:   []string{`user "agent"`, "group agent with gid 1000", "gid is 1001"},
		},
		{
			name: "unsafe entry",
			spec: `artifact "app" {
    source  = "https://downloads.example.com/app.tar.gz"
    sha256  = "` + strings.Repeat("b", 64) + `"
    dest    = "/opt/app"
    extract = true
  }`,
			inputs: map[string]fetch.Fetched{"artifact.app": unsafe(fileEnt("../../etc/cron.d/evil", 0o644, 0, 0, "x"))},
			want:   []string{`artifact "app"`, "unsafe entry", "../../etc/cron.d/evil"},
		},
		{
			name: "escaping symlink",
			spec: `artifact "app" {
    source  = "https://downloads.example.com/app.tar.gz"
    sha256  = "` + strings.Repeat("b", 64) + `"
    dest    = "/opt/app"
    extract = true
  }`,
			inputs: map[string]fetch.Fetched{"artifact.app": unsafe(symEnt("lib/evil", "../../../etc/shadow"))},
			want:   []string{`artifact "app"`, "lib/evil", "outside"},
		},
		{
			name: "directory over a symlink",
			spec: `base = "alpine:3.23"
  artifact "bb" {
    source  = "deb:busybox-static=1:1.36.1-9"
    dest    = "/"
    extract = true
  }`,
			inputs: map[string]fetch.Fetched{"base": linkedBase, "artifact.bb": binDeb},
			want:   []string{`artifact "bb"`, `entry "bin"`, "symbolic link to usr/bin"},
		},
		{
			name: "not fetched",
			spec: `artifact "claude" {
    ` + npmSrc + `
    file = "package/claude"
    dest = "/usr/bin/claude"
  }`,
			want: []string{`artifact "claude"`, "not fetched"},
		},
		{
			name: "file block through a symlink",
			spec: `base = "alpine:3.23"
  file "/bin/tool" { content = "x" }`,
			inputs: map[string]fetch.Fetched{"base": linkedBase},
			want:   []string{`file "/bin/tool"`, "/bin, a symbolic link to usr/bin"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := loadImage(t, "image \"agent\" {\n  "+c.spec+"\n}\n")
			in := Inputs{}
			for k, v := range c.inputs {
				in[k] = v
			}
			tree, err := Assemble(context.Background(), img, in, Options{})
			if err == nil {
				tree.Close()
				t.Fatal("Assemble succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestHostname(t *testing.T) {
	for name, want := range map[string]string{
		"agent": "agent", "Eval_Runner": "eval-runner", "_x_": "x", "___": "sbx",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	} {
		if got := hostnameFor(name); got != want {
			t.Errorf("hostnameFor(%q) = %q, want %q", name, got, want)
		}
		if err := checkHostname(hostnameFor(name)); err != nil {
			t.Errorf("hostnameFor(%q) = %q, which checkHostname rejects: %v", name, hostnameFor(name), err)
		}
	}
	for _, bad := range []string{"a..b", "-a", "a_b", strings.Repeat("a", 64)} {
		img := &lang.Image{Name: "agent"}
		if _, err := Assemble(context.Background(), img, nil, Options{Hostname: bad}); err == nil {
			t.Errorf("host name %q accepted", bad)
		}
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	img := loadImage(t, agentSpec())
	if _, err := Assemble(ctx, img, agentInputs(t), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Assemble with a cancelled context: %v", err)
	}
}

// TestDebianBase merges users into a Debian-like base that has gshadow and
// already declares one of the users, and extracts an archive owned by a
// user.
func TestDebianBase(t *testing.T) {
	img := loadImage(t, `
image "agent" {
  base = "debian:bookworm"
  user "agent" {
    uid    = 1000
    shell  = "/bin/bash"
    groups = ["sudo", "agents"]
  }
  artifact "work" {
    source  = "https://downloads.example.com/work.tar.gz"
    sha256  = "`+strings.Repeat("c", 64)+`"
    dest    = "/home/agent/work"
    extract = true
    uid     = 1000
    gid     = 1000
  }
}
`)
	dir := t.TempDir()
	base := ociInput(t, dir, nil, tarOf(t,
		dirEnt("etc/", 0o755),
		fileEnt("etc/passwd", 0o644, 0, 0, "root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1000:Agent,,,:/home/agent:/bin/sh\n"),
		fileEnt("etc/group", 0o644, 0, 0, "root:x:0:\nsudo:x:27:\nshadow:x:42:\nagent:x:1000:\n"),
		fileEnt("etc/shadow", 0o640, 0, 42, "root:*:19000:0:99999:7:::\nagent:*:19000:0:99999:7:::\n"),
		fileEnt("etc/gshadow", 0o640, 0, 42, "root:*::\nsudo:*::\nshadow:*::\nagent:!::\n"),
		dirEnt("home/", 0o755),
		ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "home/agent/", Mode: 0o750, Uid: 1000, Gid: 1000}},
	))
	work := fileInput(t, dir, lang.SourceURL, gz(t, tarOf(t, dirEnt("src/", 0o755), fileEnt("src/main.go", 0o644, 0, 0, "package main\n"))))
	files, _ := readTar(t, assembleTar(t, img, Inputs{"base": base, "artifact.work": work}, Options{}))
	for p, want := range map[string]string{
		"/etc/passwd":  "root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1000:Agent,,,:/home/agent:/bin/bash\n",
		"/etc/group":   "root:x:0:\nsudo:x:27:agent\nshadow:x:42:\nagent:x:1000:\nagents:x:1001:agent\n",
		"/etc/shadow":  "root:*:19000:0:99999:7:::\nagent:*:19000:0:99999:7:::\n",
		"/etc/gshadow": "root:*::\nsudo:*::agent\nshadow:*::\nagent:!::\nagents:!::agent\n",
	} {
		if got := files[p].body; got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", p, got, want)
		}
	}
	// The base's home is kept as it is; the extracted tree is the user's.
	if h := files["/home/agent"].hdr; h.Mode != 0o750 || h.Uid != 1000 {
		t.Errorf("/home/agent: mode %o uid %d, want the base's 0750 1000", h.Mode, h.Uid)
	}
	for _, p := range []string{"/home/agent/work", "/home/agent/work/src", "/home/agent/work/src/main.go"} {
		if h := files[p].hdr; h == nil || h.Uid != 1000 || h.Gid != 1000 {
			t.Errorf("%s: %+v, want owned by 1000:1000", p, h)
		}
	}
}
