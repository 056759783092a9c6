package debrepo_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/debrepo/debrepotest"
	"github.com/sbx-dev/sbx/internal/build/layers"
)

var installRepo = []debrepotest.Package{
	{Name: "tool", Version: "1.0", Arch: "amd64", Fields: map[string]string{"Depends": "libtool"},
		Files:   map[string]string{"bin/tool": "#!/bin/sh\n", "usr/share/doc/tool/README": "tool\n", "usr/bin/tool-alias": "->../../bin/tool"},
		Control: map[string]string{"md5sums": "0123456789abcdef0123456789abcdef  bin/tool\n", "postinst": "#!/bin/sh\nexit 1\n"}},
	{Name: "libtool", Version: "1.0", Arch: "amd64",
		Files: map[string]string{"lib/x86_64-linux-gnu/libtool.so.1": "ELF"}},
	{Name: "certs", Version: "1", Arch: "all",
		Files: map[string]string{"usr/share/ca-certificates/test/b.crt": "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----\n",
			"usr/share/ca-certificates/test/a.crt": "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n"}},
	{Name: "evil", Version: "1", Arch: "amd64", Files: map[string]string{"../../etc/evil": "x"}},
	{Name: "mawk", Version: "1", Arch: "amd64", Files: map[string]string{"usr/bin/mawk": "m", "usr/share/man/man1/mawk.1.gz": "x"},
		Control: map[string]string{"postinst": "#!/bin/sh\nupdate-alternatives --install /usr/bin/awk awk /usr/bin/mawk 5 \\\n  --slave /usr/share/man/man1/awk.1.gz awk.1.gz /usr/share/man/man1/mawk.1.gz \\\n  --slave /usr/bin/nawk nawk /usr/bin/nawk-missing\n" +
			"update-alternatives --install /usr/bin/computed computed \"$X\" 99\nupdate-alternatives --install /usr/bin/esc .. /usr/bin/mawk 1\nupdate-alternatives --install /bin/mawk-link mawk-link /usr/bin/mawk 1\n"}},
	{Name: "gawk", Version: "1", Arch: "amd64", Files: map[string]string{"usr/bin/gawk": "g"},
		Control: map[string]string{"postinst": "update-alternatives --install /usr/bin/awk awk /usr/bin/gawk 10\nupdate-alternatives --install /usr/bin/ghost ghost /usr/bin/not-shipped 50\n"}},
	{Name: "base-passwd", Version: "3", Arch: "amd64", Files: map[string]string{
		"usr/share/base-passwd/passwd.master": "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
		"usr/share/base-passwd/group.master":  "root:x:0:\ndaemon:x:1:\n"}},
}

func fetchAll(t *testing.T, repo *debrepotest.Repo, names ...string) []debrepo.Fetched {
	t.Helper()
	ix := repo.Index(t)
	c := repo.Client(t)
	var out []debrepo.Fetched
	for _, n := range names {
		p := ix.Versions(n)[0]
		path, err := c.Download(debrepotest.Ctx(t), []debrepo.Source{repo.Source()}, debrepo.PinOf(p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, debrepo.Fetched{Pin: debrepo.PinOf(p), Path: path})
	}
	return out
}

func installTree(t *testing.T, pkgs []debrepo.Fetched) (*layers.Tree, error) {
	t.Helper()
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return tree, debrepo.Install(debrepotest.Ctx(t), tree, pkgs)
}

func readTree(t *testing.T, tree *layers.Tree, p string) string {
	t.Helper()
	r, err := tree.Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestInstall unpacks packages into an empty root: merged-/usr paths,
// the dpkg database, the CA bundle, no maintainer script run, and the
// same bytes for the same packages in any order.
func TestInstall(t *testing.T) {
	repo := debrepotest.NewRepo(t, installRepo)
	pkgs := fetchAll(t, repo, "tool", "libtool", "certs")
	tree, err := installTree(t, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := tree.Lookup("/bin"); !ok || e.Linkname != "usr/bin" {
		t.Errorf("/bin is %+v", e)
	}
	if e, ok := tree.Lookup("/usr/bin/tool"); !ok || e.Mode != 0o755 {
		t.Errorf("/usr/bin/tool is %+v, %v", e, ok)
	}
	if _, ok := tree.Lookup("/usr/lib/x86_64-linux-gnu/libtool.so.1"); !ok {
		t.Error("the library is not under /usr/lib")
	}
	status := readTree(t, tree, "/var/lib/dpkg/status")
	for _, want := range []string{"Package: certs\nStatus: install ok installed\n", "Package: tool\nStatus: install ok installed\nVersion: 1.0\n", "Depends: libtool\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	if list := readTree(t, tree, "/var/lib/dpkg/info/tool.list"); !strings.Contains(list, "/.\n") || !strings.Contains(list, "\n/bin/tool\n") {
		t.Errorf("tool.list:\n%s", list)
	}
	if sums := readTree(t, tree, "/var/lib/dpkg/info/tool.md5sums"); !strings.Contains(sums, "bin/tool") {
		t.Errorf("md5sums %q", sums)
	}
	if b := readTree(t, tree, "/etc/ssl/certs/ca-certificates.crt"); !strings.HasPrefix(b, "-----BEGIN CERTIFICATE-----\nAAA") || !strings.Contains(b, "BBB") {
		t.Errorf("bundle:\n%s", b)
	}
	// Reversed order, same bytes.
	rev := []debrepo.Fetched{pkgs[2], pkgs[1], pkgs[0]}
	tree2, err := installTree(t, rev)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := tree.WriteTar(&a, 0); err != nil {
		t.Fatal(err)
	}
	if err := tree2.WriteTar(&b, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same packages in another order give other bytes")
	}
}

// TestInstallRefusesEscapingEntries: a package entry outside the root is
// an error naming the package.
func TestInstallRefusesEscapingEntries(t *testing.T) {
	repo := debrepotest.NewRepo(t, installRepo)
	_, err := installTree(t, fetchAll(t, repo, "evil"))
	if err == nil || !strings.Contains(err.Error(), "package evil 1") {
		t.Fatalf("Install = %v, want an error naming evil", err)
	}
}

// TestInstallChecksControl: a .deb whose control file names another
// package than the pin is refused.
func TestInstallChecksControl(t *testing.T) {
	repo := debrepotest.NewRepo(t, installRepo)
	pkgs := fetchAll(t, repo, "tool", "libtool")
	pkgs[0].Path = pkgs[1].Path
	if _, err := installTree(t, pkgs[:1]); err == nil || !strings.Contains(err.Error(), "control file says libtool") {
		t.Fatalf("Install = %v", err)
	}
}

// TestInstallAlternativesAndAccounts: postinst update-alternatives calls
// with literal arguments become links (highest priority wins; slaves
// whose target is missing, computed arguments and odd names are left
// out), and base-passwd's masters become /etc/passwd and /etc/group.
func TestInstallAlternativesAndAccounts(t *testing.T) {
	repo := debrepotest.NewRepo(t, installRepo)
	tree, err := installTree(t, fetchAll(t, repo, "mawk", "gawk", "base-passwd"))
	if err != nil {
		t.Fatal(err)
	}
	link := func(p string) string {
		e, ok := tree.Lookup(p)
		if !ok {
			return "(none)"
		}
		return e.Linkname
	}
	for p, want := range map[string]string{
		"/usr/bin/awk":                 "/etc/alternatives/awk",
		"/etc/alternatives/awk":        "/usr/bin/gawk",
		"/usr/bin/mawk-link":           "/etc/alternatives/mawk-link",
		"/etc/alternatives/mawk-link":  "/usr/bin/mawk",
		"/usr/share/man/man1/awk.1.gz": "(none)", // gawk won and has no slave
		"/usr/bin/nawk":                "(none)",
		"/usr/bin/computed":            "(none)",
		"/usr/bin/esc":                 "(none)",
		"/usr/bin/ghost":               "(none)",
		"/etc/alternatives/..":         "(none)",
	} {
		if got := link(p); got != want {
			t.Errorf("%s -> %s, want %s", p, got, want)
		}
	}
	if admin := readTree(t, tree, "/var/lib/dpkg/alternatives/awk"); admin != "auto\n/usr/bin/awk\n\n/usr/bin/gawk\n10\n\n" {
		t.Errorf("admin file %q", admin)
	}
	if pw := readTree(t, tree, "/etc/passwd"); !strings.Contains(pw, "daemon:x:1:1:") {
		t.Errorf("/etc/passwd %q", pw)
	}
	if _, ok := tree.Lookup("/etc/group"); !ok {
		t.Error("no /etc/group")
	}
}

// TestInstallKeepsBaseStatus: the base image's dpkg stanzas for other
// packages stay, a package the set installs again replaces its stanza,
// and the file is sorted by name.
func TestInstallKeepsBaseStatus(t *testing.T) {
	repo := debrepotest.NewRepo(t, installRepo)
	tree, err := layers.NewTree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	base := "Package: zlib1g\nStatus: install ok installed\nVersion: 1\n\nPackage: libtool\nStatus: install ok installed\nVersion: 0.9\n\n"
	if err := tree.Add(layers.Entry{Path: "/var/lib/dpkg/status", Type: '0', Mode: 0o644, Size: int64(len(base))}, strings.NewReader(base)); err != nil {
		t.Fatal(err)
	}
	if err := debrepo.Install(debrepotest.Ctx(t), tree, fetchAll(t, repo, "libtool")); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, tree, "/var/lib/dpkg/status")
	if !strings.HasPrefix(got, "Package: libtool\nStatus: install ok installed\nVersion: 1.0\n") || !strings.Contains(got, "\n\nPackage: zlib1g\nStatus: install ok installed\nVersion: 1\n") || strings.Contains(got, "0.9") {
		t.Errorf("status:\n%s", got)
	}
}
