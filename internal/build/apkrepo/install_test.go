package apkrepo_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/apkrepo/apkrepotest"
	"github.com/sbx-dev/sbx/internal/build/layers"
)

var installRepo = []apkrepotest.Package{
	{Name: "musl", Version: "1.2.5-r0", Provides: []string{"so:libc.musl-x86_64.so.1=1"}, Files: map[string]string{
		"lib/ld-musl-x86_64.so.1":   "\x7fELF musl loader\n",
		"lib/libc.musl-x86_64.so.1": "->ld-musl-x86_64.so.1",
	}},
	{Name: "busybox", Version: "1.36.1-r15", Depends: []string{"so:libc.musl-x86_64.so.1"}, Provides: []string{"/bin/sh", "cmd:busybox=1.36.1-r15"},
		Triggers: "/bin /usr/bin /sbin /usr/sbin",
		Files:    map[string]string{"bin/busybox": "\x7fELF busybox\n", "bin/sh": "->/bin/busybox", "etc/securetty": "console\n"},
		Scripts:  map[string]string{".post-install": "#!/bin/sh\n/bin/busybox --install -s\n", ".trigger": "#!/bin/sh\n/bin/busybox --install -s\n"}},
	{Name: "git", Version: "2.43.0-r0", Depends: []string{"musl>=1.2.5", "so:libc.musl-x86_64.so.1"}, Provides: []string{"cmd:git=2.43.0-r0"},
		Files: map[string]string{"usr/bin/git": "\x7fELF git\n", "usr/libexec/git-core/git-add": "\x7fELF git\n", "usr/share/git-core/templates/description": "Unnamed repository\n"}},
}

// baseInstalled is a base image's database: a package whose files stay,
// and an older musl that git's musl>=1.2.5 replaces.
const baseInstalled = `C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=
P:alpine-baselayout
V:3.4.3-r2
A:x86_64
S:8000
I:300000
T:Alpine base dir structure and init scripts
D:alpine-baselayout-data=3.4.3-r2 /bin/sh
F:etc
R:motd
Z:Q1ab6vRQoIcdKHz2d8xxRh5kcEpkw=
F:var/empty
M:0:0:555

C:Q1BBBBBBBBBBBBBBBBBBBBBBBBBBB=
P:musl
V:1.2.4-r2
A:x86_64
S:400000
I:600000
T:the musl c library (libc) implementation
p:so:libc.musl-x86_64.so.1=1
F:lib
R:ld-musl-x86_64.so.1
a:0:0:755
Z:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=
R:libc.musl-x86_64.so.1
a:0:0:777
Z:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=
R:old-musl-only-file
Z:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=

`

func baseTree(t *testing.T, repo *apkrepotest.Repo) *layers.Tree {
	t.Helper()
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	k := repo.Key
	for p, c := range map[string]string{
		"/etc/motd":                    "Welcome\n",
		"/lib/ld-musl-x86_64.so.1":     "old loader\n",
		"/lib/old-musl-only-file":      "stale\n",
		apkrepo.InstalledPath:          baseInstalled,
		apkrepo.WorldPath:              "alpine-baselayout\nbusybox\n",
		apkrepo.RepositoriesPath:       "# the image's own\n" + repo.Repository().URL + "\n",
		apkrepo.ArchPath:               "x86_64\n",
		apkrepo.KeysDir + "/" + k.Name: string(k.PublicPEM()),
	} {
		if err := tree.Add(layers.Entry{Path: p, Type: tar.TypeReg, Mode: 0o644, Size: int64(len(c))}, strings.NewReader(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tree.Add(layers.Entry{Path: "/lib/libc.musl-x86_64.so.1", Type: tar.TypeSymlink, Mode: 0o777, Linkname: "ld-musl-x86_64.so.1"}, nil); err != nil {
		t.Fatal(err)
	}
	return tree
}

// lockAndBuild does what sbx lock and sbx build do with an Alpine base:
// read the base, resolve, fetch and pin, then (with a fresh cache)
// download by pin and install.
func lockAndBuild(t *testing.T, repo *apkrepotest.Repo, reqs ...string) (*layers.Tree, *apkrepo.Result, []apkrepo.Pin) {
	t.Helper()
	ctx := apkrepotest.Ctx(t)
	tree := baseTree(t, repo)
	base, err := apkrepo.ReadBase(tree)
	if err != nil {
		t.Fatal(err)
	}
	c := repo.Client(t)
	c.Keys, c.Arch = base.Keys, base.Arch
	ix, err := c.Index(ctx, base.Repositories)
	if err != nil {
		t.Fatal(err)
	}
	var deps []apkrepo.Dep
	for _, r := range reqs {
		d, err := apkrepo.ParseDep(r)
		if err != nil {
			t.Fatal(err)
		}
		deps = append(deps, d)
	}
	pkgs, err := apkrepo.Resolve(ix, deps, apkrepo.ResolveOptions{Installed: base.Installed})
	if err != nil {
		t.Fatal(err)
	}
	var pins []apkrepo.Pin
	for _, p := range pkgs {
		f, err := c.Fetch(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, f.Pin)
	}
	build := repo.Client(t)
	build.Keys = base.Keys
	var fetched []apkrepo.Fetched
	for _, pin := range pins {
		path, err := build.Download(ctx, base.Repositories, pin)
		if err != nil {
			t.Fatal(err)
		}
		fetched = append(fetched, apkrepo.Fetched{Pin: pin, Path: path})
	}
	res, err := apkrepo.Install(ctx, tree, base.Keys, fetched, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return tree, res, pins
}

func read(t *testing.T, tree *layers.Tree, p string) string {
	t.Helper()
	r, err := tree.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLockAndInstall(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, installRepo)
	tree, res, pins := lockAndBuild(t, repo, "git", "busybox")

	var ids []string
	for _, p := range pins {
		ids = append(ids, p.Name+"-"+p.Version)
		b := repo.Built[p.Name+"-"+p.Version]
		if p.Identity != b.Identity || p.Size != int64(len(b.APK)) || len(p.SHA256) != 64 || p.Filename != "x86_64/"+p.Name+"-"+p.Version+".apk" {
			t.Errorf("pin %+v", p)
		}
	}
	if got := strings.Join(ids, " "); got != "busybox-1.36.1-r15 git-2.43.0-r0 musl-1.2.5-r0" {
		t.Errorf("pinned %s", got)
	}

	if got := read(t, tree, "/usr/bin/git"); got != "\x7fELF git\n" {
		t.Errorf("/usr/bin/git: %q", got)
	}
	if e, _ := tree.Lookup("/usr/bin/git"); e.Mode != 0o755 {
		t.Errorf("/usr/bin/git mode %o", e.Mode)
	}
	if e, _ := tree.Lookup("/bin/sh"); e.Type != tar.TypeSymlink || e.Linkname != "/bin/busybox" {
		t.Errorf("/bin/sh: %+v", e)
	}
	if got := read(t, tree, "/lib/ld-musl-x86_64.so.1"); got != "\x7fELF musl loader\n" {
		t.Errorf("musl was not upgraded: %q", got)
	}
	if _, ok := tree.Lookup("/lib/old-musl-only-file"); ok {
		t.Error("the replaced musl's file that the new one does not ship is still there")
	}
	if got := read(t, tree, "/etc/motd"); got != "Welcome\n" {
		t.Errorf("base file changed: %q", got)
	}

	if got, want := read(t, tree, apkrepo.WorldPath), "alpine-baselayout\nbusybox\ngit\n"; got != want {
		t.Errorf("world:\n%s\nwant:\n%s", got, want)
	}

	db := read(t, tree, apkrepo.InstalledPath)
	if !strings.HasPrefix(db, baseInstalled[:strings.Index(baseInstalled, "\n\n")+2]) {
		t.Errorf("the base's record was not kept first:\n%s", db)
	}
	if strings.Contains(db, "V:1.2.4-r2") {
		t.Error("the replaced musl's record is still in the database")
	}
	git := repo.Built["git-2.43.0-r0"]
	wantGit := "C:" + git.Identity + "\nP:git\nV:2.43.0-r0\nA:x86_64\nS:" + itoa(len(git.APK)) + "\nI:" + itoa(int(git.InstalledSize)) +
		"\nT:test package git\nU:https://test.invalid/\nL:MIT\no:git\nm:Test <t@test.invalid>\nt:1700000000\nc:0123456789abcdef0123456789abcdef01234567" +
		"\nD:musl>=1.2.5 so:libc.musl-x86_64.so.1\np:cmd:git=2.43.0-r0" +
		"\nF:usr\nF:usr/bin\nR:git\na:0:0:755\nZ:" + q1("\x7fELF git\n") +
		"\nF:usr/libexec\nF:usr/libexec/git-core\nR:git-add\nZ:" + q1("\x7fELF git\n") +
		"\nF:usr/share\nF:usr/share/git-core\nF:usr/share/git-core/templates\nR:description\nZ:" + q1("Unnamed repository\n") + "\n\n"
	if !strings.Contains(db, wantGit) {
		t.Errorf("installed database:\n%s\nlacks git's record:\n%s", db, wantGit)
	}
	installed, err := apkrepo.ParseInstalled(strings.NewReader(db))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range installed {
		names = append(names, p.ID())
	}
	if got := strings.Join(names, " "); got != "alpine-baselayout-3.4.3-r2 busybox-1.36.1-r15 git-2.43.0-r0 musl-1.2.5-r0" {
		t.Errorf("database lists %s", got)
	}

	if len(res.NotRun) != 2 || res.NotRun[0] != (apkrepo.Script{Package: "busybox-1.36.1-r15", Name: ".post-install"}) || res.NotRun[1].Name != ".trigger" {
		t.Errorf("not run: %+v", res.NotRun)
	}
	if len(res.Triggers) != 1 || res.Triggers[0] != "busybox: /bin /usr/bin /sbin /usr/sbin" {
		t.Errorf("triggers: %q", res.Triggers)
	}
}

func TestInstallIsReproducible(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, installRepo)
	var outs [][]byte
	for i := 0; i < 2; i++ {
		tree, _, _ := lockAndBuild(t, repo, "git", "busybox")
		var b bytes.Buffer
		if err := tree.WriteTar(&b, 1700000000); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b.Bytes())
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("two builds of the same pins differ")
	}
}

func TestTamperedPackages(t *testing.T) {
	k, other := keys(t)
	good := installRepo[2]
	built := apkrepotest.BuildAPK(t, k, good)
	ms := members(t, built.APK)
	evil := good
	evil.Files = map[string]string{"usr/bin/git": "\x7fELF evil\n"}
	evilBuilt := apkrepotest.BuildAPK(t, k, evil)
	em := members(t, evilBuilt.APK)
	for _, tc := range []struct {
		name string
		apk  []byte
		want string
	}{
		{"data replaced", concat(ms[0], ms[1], em[2]), "data segment's sha256"},
		{"data appended", concat(built.APK, em[2]), "data segment's sha256"},
		{"control replaced, old signature", concat(ms[0], em[1], em[2]), "does not verify"},
		{"re-signed by an unknown key", apkrepotest.BuildAPK(t, other, good).APK, "not a trusted key"},
		{"unsigned", apkrepotest.BuildAPK(t, nil, good).APK, "signature"},
		{"another validly signed build", evilBuilt.APK, "identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := apkrepotest.NewRepo(t, k, installRepo)
			repo.Set("/main/x86_64/git-2.43.0-r0.apk", tc.apk)
			c := repo.Client(t)
			p := repo.Index(t).Versions("git")[0]
			p.Size = 0 // let the size pass so that the content checks are what fails
			_, err := c.Fetch(apkrepotest.Ctx(t), p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "git-2.43.0-r0") {
				t.Fatalf("error %v, want one naming git-2.43.0-r0 and saying %q", err, tc.want)
			}
		})
	}
}

func TestDownloadChecksThePin(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, installRepo)
	ctx := apkrepotest.Ctx(t)
	f, err := repo.Client(t).Fetch(ctx, repo.Index(t).Versions("git")[0])
	if err != nil {
		t.Fatal(err)
	}
	// The repository now serves another signed build of the same size:
	// valid by its signature, not the locked bytes.
	evil := installRepo[2]
	evil.Files = map[string]string{"usr/bin/git": "\x7fELF evi1\n", "usr/libexec/git-core/git-add": "\x7fELF git\n", "usr/share/git-core/templates/description": "Unnamed repository\n"}
	repo.Set("/main/x86_64/git-2.43.0-r0.apk", apkrepotest.BuildAPK(t, k, evil).APK)
	_, err = repo.Client(t).Download(ctx, []apkrepo.Repository{repo.Repository()}, f.Pin)
	if err == nil || !strings.Contains(err.Error(), "git-2.43.0-r0") || !strings.Contains(err.Error(), "does not match the lock") {
		t.Fatalf("error %v", err)
	}
	// Same bytes as fetched, but the lock pins another digest.
	repo.Set("/main/x86_64/git-2.43.0-r0.apk", repo.Built["git-2.43.0-r0"].APK)
	other := f.Pin
	other.SHA256 = strings.Repeat("ab", 32)
	_, err = repo.Client(t).Download(ctx, []apkrepo.Repository{repo.Repository()}, other)
	if err == nil || !strings.Contains(err.Error(), "does not match the lock") {
		t.Fatalf("a file whose sha256 differs from the pin: %v", err)
	}
	if _, err := repo.Client(t).Download(ctx, []apkrepo.Repository{repo.Repository()}, f.Pin); err != nil {
		t.Fatalf("the locked bytes: %v", err)
	}
	bad := f.Pin
	bad.Filename = "../../etc/passwd.apk"
	if _, err := repo.Client(t).Download(ctx, []apkrepo.Repository{repo.Repository()}, bad); err == nil || !strings.Contains(err.Error(), "not a package path inside a repository") {
		t.Fatalf("a file name outside the repository: %v", err)
	}
}

func TestInstallRefusesUnsafeEntries(t *testing.T) {
	k, _ := keys(t)
	for name, files := range map[string]map[string]string{
		"dot-dot path":         {"../../etc/cron.d/evil": "* * * * * root sh\n"},
		"symlink climbing out": {"usr/lib/x": "->../../../../etc/shadow"},
		"symlink then file":    {"usr/": "", "usr/etc": "->/etc"},
	} {
		t.Run(name, func(t *testing.T) {
			pkg := apkrepotest.Package{Name: "evil", Version: "1-r0", Files: files}
			repo := apkrepotest.NewRepo(t, k, []apkrepotest.Package{pkg})
			ctx := apkrepotest.Ctx(t)
			c := repo.Client(t)
			f, err := c.Fetch(ctx, repo.Index(t).Versions("evil")[0])
			if err != nil {
				t.Fatal(err)
			}
			tree, err := layers.NewTree(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			_, err = apkrepo.Install(ctx, tree, k.Keys(), []apkrepo.Fetched{f}, []string{"evil"})
			if name == "symlink then file" {
				// An absolute link target is the image's own /etc: kept
				// as a link, never followed by the tree.
				if err != nil {
					t.Fatal(err)
				}
				if e, _ := tree.Lookup("/usr/etc"); e.Type != tar.TypeSymlink {
					t.Fatalf("/usr/etc: %+v", e)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "evil-1-r0") || !strings.Contains(err.Error(), "unsafe") {
				t.Fatalf("error %v", err)
			}
		})
	}
}

func TestInstallVerifiesAgain(t *testing.T) {
	k, other := keys(t)
	repo := apkrepotest.NewRepo(t, k, installRepo)
	ctx := apkrepotest.Ctx(t)
	f, err := repo.Client(t).Fetch(ctx, repo.Index(t).Versions("git")[0])
	if err != nil {
		t.Fatal(err)
	}
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if _, err := apkrepo.Install(ctx, tree, other.Keys(), []apkrepo.Fetched{f}, nil); err == nil || !strings.Contains(err.Error(), "not a trusted key") {
		t.Fatalf("error %v", err)
	}
	if _, ok := tree.Lookup("/usr/bin/git"); ok {
		t.Error("files were unpacked from a package that did not verify")
	}
}

// members splits an .apk into its gzip members' bytes.
func members(t *testing.T, apk []byte) [][]byte {
	t.Helper()
	var out [][]byte
	rest := apk
	for len(rest) > 0 && len(out) < 8 {
		n := memberLen(t, rest)
		out = append(out, rest[:n])
		rest = rest[n:]
	}
	return out
}

func memberLen(t *testing.T, data []byte) int {
	t.Helper()
	br := bytes.NewReader(data)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	if _, err := io.Copy(io.Discard, zr); err != nil {
		t.Fatal(err)
	}
	return len(data) - br.Len()
}

func itoa(n int) string { return strconv.Itoa(n) }

// q1 is apk's Z: checksum of content.
func q1(content string) string {
	s := sha1.Sum([]byte(content))
	return "Q1" + base64.StdEncoding.EncodeToString(s[:])
}

func TestFetchChecksIndexSize(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, installRepo)
	p := repo.Index(t).Versions("git")[0]
	// One byte short: the index's S: is the whole file's length.
	repo.Set("/main/x86_64/git-2.43.0-r0.apk", repo.Built["git-2.43.0-r0"].APK[:p.Size-1])
	if _, err := repo.Client(t).Fetch(apkrepotest.Ctx(t), p); err == nil || !strings.Contains(err.Error(), "the index says") {
		t.Fatalf("error %v", err)
	}
}

func TestInstallMergedUsrAndHardLinks(t *testing.T) {
	k, _ := keys(t)
	pkg := apkrepotest.Package{Name: "zlib", Version: "1.3.1-r0", Files: map[string]string{
		"lib/libz.so.1.3.1":  "\x7fELF zlib\n",
		"lib/libz.so.1":      "->libz.so.1.3.1",
		"usr/bin/zpipe":      "\x7fELF zpipe\n",
		"usr/bin/zpipe-copy": "=>usr/bin/zpipe",
	}}
	repo := apkrepotest.NewRepo(t, k, []apkrepotest.Package{pkg})
	ctx := apkrepotest.Ctx(t)
	f, err := repo.Client(t).Fetch(ctx, repo.Index(t).Versions("zlib")[0])
	if err != nil {
		t.Fatal(err)
	}
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if err := tree.Add(layers.Entry{Path: "/usr/lib", Type: tar.TypeDir, Mode: 0o755}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tree.Add(layers.Entry{Path: "/lib", Type: tar.TypeSymlink, Mode: 0o777, Linkname: "usr/lib"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := apkrepo.Install(ctx, tree, k.Keys(), []apkrepo.Fetched{f}, []string{"zlib"}); err != nil {
		t.Fatal(err)
	}
	if e, _ := tree.Lookup("/lib"); e.Type != tar.TypeSymlink {
		t.Errorf("/lib is no longer the link: %+v", e)
	}
	if got := read(t, tree, "/usr/lib/libz.so.1.3.1"); got != "\x7fELF zlib\n" {
		t.Errorf("/usr/lib/libz.so.1.3.1: %q", got)
	}
	if got := read(t, tree, "/usr/bin/zpipe-copy"); got != "\x7fELF zpipe\n" {
		t.Errorf("hard link: %q", got)
	}
	db := read(t, tree, "/usr/lib/apk/db/installed")
	// The database keeps the package's own paths, as apk records them.
	for _, want := range []string{"F:lib\nR:libz.so.1\na:0:0:777\nZ:" + q1("libz.so.1.3.1") + "\nR:libz.so.1.3.1\nZ:" + q1("\x7fELF zlib\n"),
		"R:zpipe-copy\na:0:0:755\nZ:" + q1("\x7fELF zpipe\n")} {
		if !strings.Contains(db, want) {
			t.Errorf("installed database\n%s\nlacks\n%s", db, want)
		}
	}
}

func TestInstallDropsSetuid(t *testing.T) {
	k, _ := keys(t)
	pkg := apkrepotest.Package{Name: "suid", Version: "1-r0",
		Files: map[string]string{"bin/su": "\x7fELF su\n", "tmp/": ""},
		Modes: map[string]int64{"bin/su": 0o4755, "tmp/": 0o1777}}
	repo := apkrepotest.NewRepo(t, k, []apkrepotest.Package{pkg})
	ctx := apkrepotest.Ctx(t)
	f, err := repo.Client(t).Fetch(ctx, repo.Index(t).Versions("suid")[0])
	if err != nil {
		t.Fatal(err)
	}
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if _, err := apkrepo.Install(ctx, tree, k.Keys(), []apkrepo.Fetched{f}, nil); err != nil {
		t.Fatal(err)
	}
	if e, _ := tree.Lookup("/bin/su"); e.Mode != 0o755 {
		t.Errorf("/bin/su mode %o, want 755", e.Mode)
	}
	if e, _ := tree.Lookup("/tmp"); e.Mode != 0o1777 {
		t.Errorf("/tmp mode %o, want the sticky bit kept", e.Mode)
	}
}
