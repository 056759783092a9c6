package resolve

import (
	"sort"
	"testing"
)

func TestSemverOrder(t *testing.T) {
	// Ascending, from the semver specification's examples.
	ordered := []string{
		"0.0.1", "0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
		"1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0",
	}
	var vs []semver
	for _, s := range ordered {
		v, ok := parseSemver(s)
		if !ok {
			t.Fatalf("%q did not parse", s)
		}
		vs = append(vs, v)
	}
	var shuffled []semver
	for i := len(vs) - 1; i >= 0; i-- {
		shuffled = append(shuffled, vs[i])
	}
	sort.SliceStable(shuffled, func(i, j int) bool { return shuffled[i].compare(shuffled[j]) < 0 })
	for i := range vs {
		if shuffled[i].compare(vs[i]) != 0 {
			t.Fatalf("position %d: got %+v, want %s", i, shuffled[i], ordered[i])
		}
	}
	if a, _ := parseSemver("v1.2.3+build.5"); a.compare(semver{major: 1, minor: 2, patch: 3}) != 0 {
		t.Errorf("build metadata or v prefix changed the order")
	}
	for _, bad := range []string{"1.2", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.x", "latest", "1.2.3.4", "-1.2.3", "1.2.3-a..b"} {
		if _, ok := parseSemver(bad); ok {
			t.Errorf("%q parsed as a version", bad)
		}
	}
}

func TestSemverRanges(t *testing.T) {
	cases := []struct {
		rng string
		in  []string
		out []string
	}{
		{"1.2.3", []string{"1.2.3"}, []string{"1.2.4", "1.2.3-rc.1"}},
		{"=1.2.3", []string{"1.2.3"}, []string{"1.2.2"}},
		{"^1.2.3", []string{"1.2.3", "1.9.9"}, []string{"2.0.0", "1.2.2", "2.0.0-0", "1.5.0-beta"}},
		{"^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.3.0", "0.2.2"}},
		{"^0.0.3", []string{"0.0.3"}, []string{"0.0.4"}},
		{"^0.0", []string{"0.0.0", "0.0.9"}, []string{"0.1.0"}},
		{"^1.x", []string{"1.0.0", "1.9.0"}, []string{"2.0.0"}},
		{"^1.2.3-beta.2", []string{"1.2.3-beta.2", "1.2.3-beta.10", "1.2.3", "1.3.0"}, []string{"1.2.3-beta.1", "1.2.4-beta.3", "2.0.0"}},
		{"~1.2.3", []string{"1.2.3", "1.2.9"}, []string{"1.3.0", "1.2.2"}},
		{"~1.2", []string{"1.2.0", "1.2.9"}, []string{"1.3.0"}},
		{"~1", []string{"1.0.0", "1.9.0"}, []string{"2.0.0"}},
		{"~>1.2.3", []string{"1.2.5"}, []string{"1.3.0"}},
		{"1.x", []string{"1.0.0", "1.99.0"}, []string{"2.0.0", "0.9.0"}},
		{"1.2.*", []string{"1.2.0", "1.2.7"}, []string{"1.3.0"}},
		{"*", []string{"0.0.1", "9.9.9"}, []string{"1.0.0-rc.1"}},
		{"", []string{"3.4.5"}, nil},
		{"x", []string{"3.4.5"}, nil},
		{">1.2.3", []string{"1.2.4"}, []string{"1.2.3"}},
		{">1.2", []string{"1.3.0"}, []string{"1.2.9"}},
		{">=1.2.3", []string{"1.2.3", "5.0.0"}, []string{"1.2.2"}},
		{"<1.2.3", []string{"1.2.2"}, []string{"1.2.3", "1.2.3-beta"}},
		{"<1.2", []string{"1.1.9"}, []string{"1.2.0"}},
		{"<=1.2", []string{"1.2.9"}, []string{"1.3.0"}},
		{"<=1.2.3", []string{"1.2.3"}, []string{"1.2.4"}},
		{">= 1.2.3 < 2", []string{"1.5.0"}, []string{"2.0.0", "1.2.2"}},
		{">=1.0.0 <1.5.0 || >=2.0.0", []string{"1.4.0", "2.1.0"}, []string{"1.5.0", "1.9.0"}},
		{"1.2.3 - 2.3.4", []string{"1.2.3", "2.3.4"}, []string{"2.3.5", "1.2.2"}},
		{"1.2 - 2.3", []string{"1.2.0", "2.3.9"}, []string{"2.4.0"}},
		{"1 - 2", []string{"2.9.9"}, []string{"3.0.0"}},
		{"v1.2.3", []string{"1.2.3"}, nil},
	}
	for _, c := range cases {
		r, ok := parseRange(c.rng)
		if !ok {
			t.Errorf("%q did not parse", c.rng)
			continue
		}
		for _, s := range c.in {
			if v, _ := parseSemver(s); !r.satisfies(v) {
				t.Errorf("%q should include %s", c.rng, s)
			}
		}
		for _, s := range c.out {
			if v, _ := parseSemver(s); r.satisfies(v) {
				t.Errorf("%q should exclude %s", c.rng, s)
			}
		}
	}
	for _, notRange := range []string{"latest", "next", "beta-2", "1.2.3.4", "^latest", "1.x.3"} {
		if _, ok := parseRange(notRange); ok {
			t.Errorf("%q parsed as a range", notRange)
		}
	}
}
