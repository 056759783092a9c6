package debrepo_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/debrepo/debrepotest"
)

func pkg(name, version string, fields map[string]string) debrepotest.Package {
	return debrepotest.Package{Name: name, Version: version, Arch: "amd64", Fields: fields,
		Files: map[string]string{"usr/share/doc/" + name + "/copyright": name + " " + version + "\n"}}
}

// resolveNames resolves reqs over ix and returns "name=version" strings.
func resolveNames(t *testing.T, ix *debrepo.Index, opts debrepo.ResolveOptions, reqs ...string) ([]string, error) {
	t.Helper()
	var rs []debrepo.Request
	for _, s := range reqs {
		r, err := debrepo.ParseRequest(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	pkgs, err := debrepo.Resolve(ix, rs, opts)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pkgs {
		out = append(out, p.Name+"="+p.Version.String())
	}
	return out, nil
}

func wantSet(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("resolved\n  %s\nwant\n  %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

var resolverRepo = []debrepotest.Package{
	// Alternatives: the first satisfiable one, unless another is chosen.
	pkg("editor-user", "1.0", map[string]string{"Depends": "nonexistent | vim-tiny | nano"}),
	pkg("vim-tiny", "9.0", nil),
	pkg("nano", "7.2", nil),
	pkg("nano-user", "1.0", map[string]string{"Depends": "nano"}),
	// Versioned dependencies choose among versions.
	pkg("libfoo", "1.0-1", nil),
	pkg("libfoo", "2.1-1", nil),
	pkg("new-app", "1.0", map[string]string{"Depends": "libfoo (>= 2.0)"}),
	pkg("old-app", "1.0", map[string]string{"Pre-Depends": "libfoo (<< 2.0)"}),
	pkg("too-new-app", "1.0", map[string]string{"Depends": "libfoo (>= 3)"}),
	// Virtual packages and versioned Provides.
	pkg("mailer", "1.0", map[string]string{"Depends": "mail-transport-agent"}),
	pkg("postfix", "3.7", map[string]string{"Provides": "mail-transport-agent"}),
	pkg("exim4", "4.96", map[string]string{"Provides": "mail-transport-agent"}),
	pkg("api-user", "1.0", map[string]string{"Depends": "libapi (>= 3)"}),
	pkg("libapi-two", "1.0", map[string]string{"Provides": "libapi (= 2)"}),
	pkg("libapi-three", "1.0", map[string]string{"Provides": "libapi (= 3)"}),
	// A conflict two levels down.
	pkg("stack", "1.0", map[string]string{"Depends": "left, right"}),
	pkg("left", "1.0", map[string]string{"Conflicts": "middle (<< 2)"}),
	pkg("right", "1.0", map[string]string{"Depends": "middle"}),
	pkg("middle", "1.5", nil),
	pkg("breaker", "1.0", map[string]string{"Breaks": "nano"}),
	// Architecture qualifiers and arch: all.
	pkg("any-user", "1.0", map[string]string{"Depends": "perlish:any, noarch"}),
	pkg("perlish", "5.36", map[string]string{"Multi-Arch": "allowed"}),
	{Name: "noarch", Version: "1", Arch: "all"},
	{Name: "foreign", Version: "1", Arch: "arm64"},
	pkg("foreign-user", "1.0", map[string]string{"Depends": "nano:arm64"}),
	// Essential packages.
	pkg("base-sh", "1.0", map[string]string{"Essential": "yes", "Depends": "libfoo"}),
	pkg("base-awk", "1.0", map[string]string{"Priority": "required"}),
}

func TestResolveClosure(t *testing.T) {
	ix := debrepotest.NewRepo(t, resolverRepo).Index(t)
	for _, tc := range []struct {
		name string
		reqs []string
		opts debrepo.ResolveOptions
		want []string
	}{
		{"first satisfiable alternative", []string{"editor-user"}, debrepo.ResolveOptions{}, []string{"editor-user=1.0", "vim-tiny=9.0"}},
		{"an alternative already chosen is kept", []string{"editor-user", "nano-user"}, debrepo.ResolveOptions{}, []string{"editor-user=1.0", "nano=7.2", "nano-user=1.0"}},
		{"an installed alternative adds nothing", []string{"editor-user"}, debrepo.ResolveOptions{Installed: []*debrepo.Package{ix.Versions("nano")[0]}}, []string{"editor-user=1.0"}},
		{"versioned depends takes the newest that fits", []string{"new-app"}, debrepo.ResolveOptions{}, []string{"libfoo=2.1-1", "new-app=1.0"}},
		{"pre-depends upper bound", []string{"old-app"}, debrepo.ResolveOptions{}, []string{"libfoo=1.0-1", "old-app=1.0"}},
		{"request with a version", []string{"libfoo (<< 2)"}, debrepo.ResolveOptions{}, []string{"libfoo=1.0-1"}},
		{"exact request", []string{"libfoo=1.0-1"}, debrepo.ResolveOptions{}, []string{"libfoo=1.0-1"}},
		{"preferred version kept", []string{"libfoo"}, debrepo.ResolveOptions{Prefer: map[string]string{"libfoo": "1.0-1"}}, []string{"libfoo=1.0-1"}},
		{"preferred version that no longer fits moves", []string{"new-app"}, debrepo.ResolveOptions{Prefer: map[string]string{"libfoo": "1.0-1"}}, []string{"libfoo=2.1-1", "new-app=1.0"}},
		{"virtual package: first provider by name", []string{"mailer"}, debrepo.ResolveOptions{}, []string{"exim4=4.96", "mailer=1.0"}},
		{"virtual package: a chosen provider is kept", []string{"mailer", "postfix"}, debrepo.ResolveOptions{}, []string{"mailer=1.0", "postfix=3.7"}},
		{"versioned provides", []string{"api-user"}, debrepo.ResolveOptions{}, []string{"api-user=1.0", "libapi-three=1.0"}},
		{":any and arch all", []string{"any-user"}, debrepo.ResolveOptions{}, []string{"any-user=1.0", "noarch=1", "perlish=5.36"}},
		{"essential packages without a dpkg database", []string{"nano"}, debrepo.ResolveOptions{Essential: true}, []string{"base-awk=1.0", "base-sh=1.0", "libfoo=2.1-1", "nano=7.2"}},
		{"essential packages the base has are not added", []string{"nano"}, debrepo.ResolveOptions{Essential: true, Installed: []*debrepo.Package{ix.Versions("base-sh")[0], ix.Versions("base-awk")[0]}}, []string{"nano=7.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveNames(t, ix, tc.opts, tc.reqs...)
			if err != nil {
				t.Fatal(err)
			}
			wantSet(t, got, tc.want...)
			// Request order does not matter.
			rev := append([]string(nil), tc.reqs...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			again, err := resolveNames(t, ix, tc.opts, rev...)
			if err != nil {
				t.Fatal(err)
			}
			wantSet(t, again, tc.want...)
		})
	}
}

func TestResolveErrors(t *testing.T) {
	ix := debrepotest.NewRepo(t, resolverRepo).Index(t)
	for _, tc := range []struct {
		name string
		reqs []string
		want []string // substrings of the error
	}{
		{"conflict names both chains", []string{"stack"}, []string{
			"left 1.0 (amd64) conflicts middle (<< 2)", "middle 1.5 (amd64) is in the set",
			"stack depends on left", "right depends on middle", "stack is requested"}},
		{"breaks", []string{"breaker", "nano"}, []string{"breaker 1.0 (amd64) breaks nano", "nano 7.2 (amd64) is in the set"}},
		{"version nobody has", []string{"too-new-app"}, []string{"too-new-app 1.0 (amd64) depends libfoo (>= 3)", "no package in the repositories provides"}},
		{"unknown package", []string{"no-such-thing"}, []string{"no repository has a package no-such-thing"}},
		{"requested version missing", []string{"libfoo (>= 9)"}, []string{"only libfoo 2.1-1, 1.0-1"}},
		{"foreign architecture", []string{"foreign-user"}, []string{"depends nano:arm64"}},
		{"foreign package not indexed", []string{"foreign"}, []string{"no repository has a package foreign"}},
		{"two requests that cannot both hold", []string{"libfoo (<< 2)", "new-app"}, []string{"new-app 1.0 (amd64) depends libfoo (>= 2.0)", "libfoo 1.0-1 was chosen"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveNames(t, ix, debrepo.ResolveOptions{}, tc.reqs...)
			if err == nil {
				t.Fatalf("resolved %v, want an error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
}

func TestParseRequest(t *testing.T) {
	for in, want := range map[string]string{
		"git":                      "git",
		"git=1:2.39.5-0+deb12u2":   "git (= 1:2.39.5-0+deb12u2)",
		"git (>= 2.30)":            "git (>= 2.30)",
		"libc6>=2.36":              "libc6 (>= 2.36)",
		" ca-certificates (<< 9) ": "ca-certificates (<< 9)",
	} {
		r, err := debrepo.ParseRequest(in)
		if err != nil || r.String() != want {
			t.Errorf("debrepo.ParseRequest(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, bad := range []string{"", "G", "git ~ 2", "git (>= )", "git>=a b", "-x", "git; rm"} {
		if r, err := debrepo.ParseRequest(bad); err == nil {
			t.Errorf("debrepo.ParseRequest(%q) = %v, want an error", bad, r)
		}
	}
}

// TestBadSignature: an InRelease signed by a key outside the keyring, or
// whose signed text was altered, is rejected, and nothing of the
// repository is used.
func TestBadSignature(t *testing.T) {
	repo := debrepotest.NewRepo(t, resolverRepo[:3])
	good := repo.Get("/dists/stable/InRelease")
	other, err := openpgp.NewEntity("someone else", "", "x@test.invalid", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := splitSigned(good)
	for name, data := range map[string][]byte{
		"signed by another key": repo.Sign(t, b, other),
		"text altered":          bytes.Replace(good, []byte("Suite: stable"), []byte("Suite: stablE"), 1),
		"not signed":            b,
	} {
		t.Run(name, func(t *testing.T) {
			repo.Set("/dists/stable/InRelease", data)
			_, err := repo.Client(t).Index(debrepotest.Ctx(t), []debrepo.Source{repo.Source()})
			if err == nil || !strings.Contains(err.Error(), "InRelease") {
				t.Fatalf("Index = %v, want an InRelease error", err)
			}
		})
	}
	// The same key given as a keyring file (armored) verifies.
	repo.Set("/dists/stable/InRelease", good)
	var arm bytes.Buffer
	if err := repo.Key.Serialize(&arm); err != nil {
		t.Fatal(err)
	}
	src := repo.Source()
	src.SignedBy = debrepotest.WriteFile(t, "test.gpg", arm.Bytes())
	c := repo.Client(t)
	c.Keyring = openpgp.EntityList{other}
	if _, err := c.Index(debrepotest.Ctx(t), []debrepo.Source{src}); err != nil {
		t.Fatalf("Signed-By keyring: %v", err)
	}
}

func splitSigned(inrelease []byte) (text []byte, sig []byte) {
	start := bytes.Index(inrelease, []byte("\n\n")) + 2
	end := bytes.Index(inrelease, []byte("\n-----BEGIN PGP SIGNATURE"))
	return inrelease[start : end+1], inrelease[end:]
}

// TestTamperedIndex: a Packages index whose bytes differ from what the
// signed InRelease lists is rejected.
func TestTamperedIndex(t *testing.T) {
	repo := debrepotest.NewRepo(t, resolverRepo[:3])
	p := "/dists/stable/main/binary-amd64/Packages.xz"
	data := append([]byte(nil), repo.Get(p)...)
	data[len(data)/2] ^= 1
	repo.Set(p, data)
	_, err := repo.Client(t).Index(debrepotest.Ctx(t), []debrepo.Source{repo.Source()})
	if err == nil || !strings.Contains(err.Error(), "InRelease says") {
		t.Fatalf("Index = %v, want a hash mismatch", err)
	}
}

// TestTamperedPackage: a .deb whose bytes differ from the pin is an error
// naming the package, and nothing enters the cache.
func TestTamperedPackage(t *testing.T) {
	repo := debrepotest.NewRepo(t, resolverRepo[:3])
	ix := repo.Index(t)
	p := ix.Versions("vim-tiny")[0]
	deb := append([]byte(nil), repo.Get("/"+p.Filename)...)
	deb[len(deb)-3] ^= 0x20
	repo.Set("/"+p.Filename, deb)
	c := repo.Client(t)
	_, err := c.Download(debrepotest.Ctx(t), []debrepo.Source{repo.Source()}, debrepo.PinOf(p))
	if err == nil || !strings.Contains(err.Error(), "vim-tiny 9.0") || !strings.Contains(err.Error(), "does not match the lock") {
		t.Fatalf("Download = %v, want a mismatch naming vim-tiny", err)
	}
	if c.Cache.Has(p.SHA256) {
		t.Fatal("the tampered package entered the cache")
	}
	// A pin whose file name leaves the repository is refused before any
	// request.
	bad := debrepo.PinOf(p)
	bad.Filename = "pool/../../etc/passwd"
	if _, err := c.Download(debrepotest.Ctx(t), []debrepo.Source{repo.Source()}, bad); err == nil || !strings.Contains(err.Error(), "not a path inside a repository") {
		t.Fatalf("Download(%q) = %v", bad.Filename, err)
	}
}

// TestOfflineFromCache: once a source was verified, a lock without
// network uses the cached InRelease and index.
func TestOfflineFromCache(t *testing.T) {
	repo := debrepotest.NewRepo(t, resolverRepo[:3])
	c := repo.Client(t)
	if _, err := c.Index(debrepotest.Ctx(t), []debrepo.Source{repo.Source()}); err != nil {
		t.Fatal(err)
	}
	repo.Srv.Close()
	ix, err := c.Index(debrepotest.Ctx(t), []debrepo.Source{repo.Source()})
	if err != nil {
		t.Fatalf("offline Index: %v", err)
	}
	if len(ix.Versions("nano")) != 1 {
		t.Fatal("the cached index lacks nano")
	}
	// Without the cache the same is an error.
	c2 := repo.Client(t)
	c2.Cache, _ = cache.Open(t.TempDir())
	if _, err := c2.Index(debrepotest.Ctx(t), []debrepo.Source{repo.Source()}); err == nil {
		t.Fatal("Index without network or cache succeeded")
	}
}

func TestParseSources(t *testing.T) {
	one := "# comment\ndeb [arch=amd64 signed-by=/k.gpg] https://repo.test/debian bookworm main contrib\ndeb-src https://repo.test/debian bookworm main\n"
	s, err := debrepo.ParseSources([]byte(one), false)
	if err != nil || len(s) != 1 || s[0].SignedBy != "/k.gpg" || s[0].Suite != "bookworm" || len(s[0].Components) != 2 || s[0].Architectures[0] != "amd64" {
		t.Fatalf("one-line: %+v %v", s, err)
	}
	d822 := "Types: deb deb-src\nURIs: https://a.test/debian https://b.test/debian/\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/k.gpg\n\nTypes: deb\nEnabled: no\nURIs: https://c.test/\nSuites: x\nComponents: main\n"
	s, err = debrepo.ParseSources([]byte(d822), true)
	if err != nil || len(s) != 4 || s[1].URI != "https://a.test/debian" || s[1].Suite != "bookworm-updates" || s[3].URI != "https://b.test/debian" {
		t.Fatalf("deb822: %+v %v", s, err)
	}
	for _, bad := range []string{"deb cdrom:[x]/ stable main\n", "deb https://x.test/ ./\n", "rpm https://x.test stable main\n"} {
		if _, err := debrepo.ParseSources([]byte(bad), false); err == nil {
			t.Errorf("debrepo.ParseSources(%q) succeeded", bad)
		}
	}
	if _, err := debrepo.ParseSources([]byte("Types: deb\nURIs: https://x.test\nSuites: s\nComponents: main\nSigned-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n"), true); err == nil || !errors.Is(err, err) || !strings.Contains(err.Error(), "inline") {
		t.Errorf("inline key: %v", err)
	}
}
