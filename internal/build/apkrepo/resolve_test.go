package apkrepo_test

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/apkrepo/apkrepotest"
)

func p(name, version string, deps, provides []string) apkrepotest.Package {
	return apkrepotest.Package{Name: name, Version: version, Depends: deps, Provides: provides, Files: usrFile(name)}
}

var resolverRepo = []apkrepotest.Package{
	// The C library and a shared library found through so: names.
	p("musl", "1.2.5-r0", nil, []string{"so:libc.musl-x86_64.so.1=1"}),
	p("musl", "1.2.4-r2", nil, []string{"so:libc.musl-x86_64.so.1=1"}),
	p("zlib", "1.3.1-r0", []string{"so:libc.musl-x86_64.so.1"}, []string{"so:libz.so.1=1.3.1"}),
	p("zlib-ng-compat", "2.1.0-r0", []string{"so:libc.musl-x86_64.so.1"}, []string{"so:libz.so.1=1.2.13"}),
	p("libcurl", "8.5.0-r0", []string{"so:libc.musl-x86_64.so.1", "so:libz.so.1"}, []string{"so:libcurl.so.4=4.8.0"}),
	p("curl", "8.5.0-r0", []string{"so:libcurl.so.4", "so:libc.musl-x86_64.so.1"}, []string{"cmd:curl=8.5.0-r0"}),
	// Versioned dependencies choose among versions.
	p("libfoo", "1.0-r0", nil, nil),
	p("libfoo", "2.1-r0", nil, nil),
	p("libfoo", "2.1_rc1-r0", nil, nil),
	p("new-app", "1.0-r0", []string{"libfoo>=2"}, nil),
	p("old-app", "1.0-r0", []string{"libfoo<2"}, nil),
	p("prefix-app", "1.0-r0", []string{"libfoo~2.1"}, nil),
	p("too-new-app", "1.0-r0", []string{"libfoo>=3"}, nil),
	// Virtual names: unversioned provides need a priority.
	p("mailer", "1.0-r0", []string{"mta"}, nil),
	p("postfix", "3.8-r0", nil, []string{"mta"}),
	{Name: "exim", Version: "4.97-r0", Provides: []string{"mta"}, ProviderPriority: "10", Files: usrFile("exim")},
	{Name: "msmtp", Version: "1.8-r0", Provides: []string{"mta"}, ProviderPriority: "20", Files: usrFile("msmtp")},
	p("shell-user", "1.0-r0", []string{"/bin/sh"}, nil),
	p("needs-sh", "1.0-r0", []string{"sh-impl"}, nil),
	p("dash", "0.5-r0", nil, []string{"sh-impl"}),
	p("mksh", "59-r0", nil, []string{"sh-impl"}),
	// A conflict two levels down.
	p("stack", "1.0-r0", []string{"left", "right"}, nil),
	p("left", "1.0-r0", []string{"!middle<2"}, nil),
	p("right", "1.0-r0", []string{"middle"}, nil),
	p("middle", "1.5-r0", nil, nil),
	// Two packages owning one versioned name.
	p("owns-a", "1.0-r0", nil, []string{"cmd:tool=1.0"}),
	p("owns-b", "1.0-r0", nil, []string{"cmd:tool=2.0"}),
	// Other architectures are ignored, noarch is taken.
	{Name: "foreign", Version: "1-r0", Arch: "aarch64"},
	{Name: "scripts", Version: "1-r0", Arch: "noarch", InstallIf: []string{"curl", "docs"}},
}

func resolveNames(t *testing.T, ix *apkrepo.Index, opts apkrepo.ResolveOptions, reqs ...string) ([]string, error) {
	t.Helper()
	var ds []apkrepo.Dep
	for _, s := range reqs {
		d, err := apkrepo.ParseDep(s)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	pkgs, err := apkrepo.Resolve(ix, ds, opts)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pkgs {
		out = append(out, p.ID())
	}
	return out, nil
}

func TestResolveClosure(t *testing.T) {
	k, _ := keys(t)
	ix := apkrepotest.NewRepo(t, k, resolverRepo).Index(t)
	oldMusl := ix.Versions("musl")[1]
	if oldMusl.Version != "1.2.4-r2" {
		t.Fatalf("versions of musl: %v", ix.Versions("musl"))
	}
	for _, tc := range []struct {
		name string
		reqs []string
		opts apkrepo.ResolveOptions
		want []string
	}{
		{"so: names through versioned provides", []string{"curl"}, apkrepo.ResolveOptions{}, []string{"curl-8.5.0-r0", "libcurl-8.5.0-r0", "musl-1.2.5-r0", "zlib-1.3.1-r0"}},
		{"the highest provided version wins among so: providers", []string{"libcurl"}, apkrepo.ResolveOptions{}, []string{"libcurl-8.5.0-r0", "musl-1.2.5-r0", "zlib-1.3.1-r0"}},
		{"a requested provider is kept", []string{"curl", "zlib-ng-compat"}, apkrepo.ResolveOptions{}, []string{"curl-8.5.0-r0", "libcurl-8.5.0-r0", "musl-1.2.5-r0", "zlib-ng-compat-2.1.0-r0"}},
		{"what the base has adds nothing", []string{"curl"}, apkrepo.ResolveOptions{Installed: []*apkrepo.Package{oldMusl}}, []string{"curl-8.5.0-r0", "libcurl-8.5.0-r0", "zlib-1.3.1-r0"}},
		{"a base version too old is replaced", []string{"musl>=1.2.5"}, apkrepo.ResolveOptions{Installed: []*apkrepo.Package{oldMusl}}, []string{"musl-1.2.5-r0"}},
		{"cmd: names", []string{"cmd:curl"}, apkrepo.ResolveOptions{}, []string{"curl-8.5.0-r0", "libcurl-8.5.0-r0", "musl-1.2.5-r0", "zlib-1.3.1-r0"}},
		{"newest satisfying version", []string{"new-app"}, apkrepo.ResolveOptions{}, []string{"libfoo-2.1-r0", "new-app-1.0-r0"}},
		{"upper bound", []string{"old-app"}, apkrepo.ResolveOptions{}, []string{"libfoo-1.0-r0", "old-app-1.0-r0"}},
		{"prefix match", []string{"prefix-app"}, apkrepo.ResolveOptions{}, []string{"libfoo-2.1-r0", "prefix-app-1.0-r0"}},
		{"a release candidate is below the release", []string{"libfoo<2.1"}, apkrepo.ResolveOptions{}, []string{"libfoo-2.1_rc1-r0"}},
		{"exact request", []string{"libfoo=1.0-r0"}, apkrepo.ResolveOptions{}, []string{"libfoo-1.0-r0"}},
		{"preferred version kept", []string{"libfoo"}, apkrepo.ResolveOptions{Prefer: map[string]string{"libfoo": "1.0-r0"}}, []string{"libfoo-1.0-r0"}},
		{"preferred version that no longer fits moves", []string{"new-app"}, apkrepo.ResolveOptions{Prefer: map[string]string{"libfoo": "1.0-r0"}}, []string{"libfoo-2.1-r0", "new-app-1.0-r0"}},
		{"unversioned virtual: highest priority", []string{"mailer"}, apkrepo.ResolveOptions{}, []string{"mailer-1.0-r0", "msmtp-1.8-r0"}},
		{"unversioned virtual: a chosen provider is kept", []string{"mailer", "postfix"}, apkrepo.ResolveOptions{}, []string{"mailer-1.0-r0", "postfix-3.8-r0"}},
		{"noarch, and install_if brings nothing", []string{"scripts", "curl"}, apkrepo.ResolveOptions{}, []string{"curl-8.5.0-r0", "libcurl-8.5.0-r0", "musl-1.2.5-r0", "scripts-1-r0", "zlib-1.3.1-r0"}},
		{"a conflict request that matches nothing", []string{"curl", "!postfix"}, apkrepo.ResolveOptions{}, []string{"curl-8.5.0-r0", "libcurl-8.5.0-r0", "musl-1.2.5-r0", "zlib-1.3.1-r0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveNames(t, ix, tc.opts, tc.reqs...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("resolved\n  %s\nwant\n  %s", strings.Join(got, " "), strings.Join(tc.want, " "))
			}
			rev := append([]string(nil), tc.reqs...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			again, err := resolveNames(t, ix, tc.opts, rev...)
			if err != nil || strings.Join(again, " ") != strings.Join(got, " ") {
				t.Errorf("reversed requests gave %v, %v", again, err)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	k, _ := keys(t)
	ix := apkrepotest.NewRepo(t, k, resolverRepo).Index(t)
	for _, tc := range []struct {
		name string
		reqs []string
		want []string // substrings of the error
	}{
		{"conflict two levels down names both chains", []string{"stack"},
			[]string{"left-1.0-r0 conflicts with !middle<2", "middle-1.5-r0 is in the set", "stack is requested (stack), stack depends on left", "stack depends on right, right depends on middle"}},
		{"conflict with a request", []string{"mailer", "!msmtp"}, []string{"the request !msmtp forbids msmtp-1.8-r0", "mailer depends on mta"}},
		{"two owners of a versioned name", []string{"owns-a", "owns-b"}, []string{"owns-a-1.0-r0 and owns-b-1.0-r0 both provide cmd:tool"}},
		{"no version fits", []string{"too-new-app"}, []string{"too-new-app-1.0-r0 depends on libfoo>=3, but the repositories have only libfoo 2.1-r0, 2.1_rc1-r0, 1.0-r0", "too-new-app is requested"}},
		{"one version per name", []string{"new-app", "old-app"}, []string{"old-app-1.0-r0 depends on libfoo<2, but libfoo-2.1-r0 was chosen", "new-app depends on libfoo>=2"}},
		{"virtual without priority", []string{"needs-sh"}, []string{"sh-impl is a virtual name provided by dash-0.5-r0, mksh-59-r0"}},
		{"missing", []string{"shell-user"}, []string{"no repository has a package or provider named /bin/sh"}},
		{"other architectures are not candidates", []string{"foreign"}, []string{"no repository has a package or provider named foreign"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveNames(t, ix, apkrepo.ResolveOptions{}, tc.reqs...)
			if err == nil {
				t.Fatalf("resolved %v, want an error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\ndoes not say\n  %s", err, w)
				}
			}
		})
	}
}
