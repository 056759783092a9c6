package apkrepo

import "testing"

// Cases follow the ordering apk-package(5) documents: numbers compare
// numerically, a letter after the numbers, then suffixes ranked alpha <
// beta < pre < rc < (none) < cvs < svn < git < hg < p, an optional ~hash,
// and the -rN build number last.
func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a    string
		want int
		b    string
	}{
		{"1.0", 0, "1.0"},
		{"1.0-r1", 0, "1.0-r1"},
		{"2", 1, "1.99"},
		{"1.10", 1, "1.9"},                // numeric, not lexical
		{"1.2.10", 1, "1.2.9"},            // in every component
		{"10.0", 1, "9.9.9"},              // the first component too
		{"1.0.1", 1, "1.0"},               // a further component is newer
		{"1.0a", 1, "1.0"},                // a letter is newer than nothing
		{"1.0b", 1, "1.0a"},               // letters by character
		{"1.0.1", 1, "1.0z"},              // another component beats a letter
		{"1.0", 1, "1.0_rc1"},             // a pre-release is older
		{"1.0_rc1", 1, "1.0_pre9"},        // rc after pre
		{"1.0_pre1", 1, "1.0_beta9"},      // pre after beta
		{"1.0_beta1", 1, "1.0_alpha9"},    // beta after alpha
		{"1.0_alpha2", 1, "1.0_alpha1"},   // suffix numbers compare
		{"1.0_alpha1", 1, "1.0_alpha"},    // a suffix number is newer than none
		{"1.0_p1", 1, "1.0"},              // _p is a post-release
		{"1.0_git20240101", 1, "1.0"},     // so are the VCS suffixes
		{"1.0_p1", 1, "1.0_hg5"},          // p ranks above hg
		{"1.0_cvs1", -1, "1.0_svn1"},      // cvs below svn
		{"1.0-r1", 1, "1.0"},              // a build number is newer
		{"1.0-r10", 1, "1.0-r9"},          // build numbers are numbers
		{"1.0_p1", 1, "1.0-r9"},           // a suffix outranks a build number
		{"1.0.1-r0", 1, "1.0-r5"},         // components before build numbers
		{"1.0_rc1-r3", -1, "1.0-r0"},      // a pre-release with any build
		{"1.0~abc1-r1", 1, "1.0~abc1-r0"}, // hashes equal, builds decide
		{"1.0~abc2", 1, "1.0~abc1"},       // hashes compare as strings
		{"1.0~abc1", 1, "1.0"},            // a hash is newer than nothing
		{"1.01", -1, "1.1"},               // a leading zero compares as text
		{"1.002", -1, "1.01"},             // "002" < "01" as text
		{"1.0", -1, "1.00"},               // and a longer text is newer
		{"2024.01.15", 1, "2023.12.31"},
		{"1.0.0_pre20191002222144-r0", -1, "1.0.0_pre20210530193627-r0"},
		{"123456789012345678901234567890", 1, "123456789012345678901234567889"}, // beyond 64 bits
		{"1.0_alpha_p1", 1, "1.0_alpha"},                                        // a further post-release suffix is newer
		{"0.1.0_alpha_pre2", -1, "0.1.0_alpha"},                                 // a further pre-release one older
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := CompareVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestValidVersion(t *testing.T) {
	for _, v := range []string{"1", "1.2.3", "1.2a", "1.2_rc1", "1.2_p1_pre2", "1.2_git20240101-r3", "1.2~0af3-r1", "1.0_alpha"} {
		if !ValidVersion(v) {
			t.Errorf("%q should be valid", v)
		}
	}
	for _, v := range []string{"", "a1", ".1", "1.", "1..2", "1.2ab", "1.2a3", "1.2_", "1.2_foo", "1.2_1", "1.2-r", "1.2-1", "1.2-r1-r2", "1.2-r1_p1", "1.2-r1.3", "1.2~", "1.2~xyz", "1.2~ab_p1", "v1.0", "1.0 ", "_p1", "-r1"} {
		if ValidVersion(v) {
			t.Errorf("%q should be invalid", v)
		}
	}
}

func TestDepMatches(t *testing.T) {
	for _, tc := range []struct {
		dep, version string
		want         bool
	}{
		{"foo", "1.0", true},
		{"foo=1.0-r1", "1.0-r1", true},
		{"foo=1.0", "1.0-r1", false},
		{"foo<2", "1.9", true},
		{"foo<2", "2_rc1", true}, // a pre-release of 2 is before 2
		{"foo<2", "2", false},
		{"foo<=2", "2", true},
		{"foo>=2", "2_rc1", false},
		{"foo>=2", "2.0.1", true},
		{"foo>1.2", "1.2-r1", true},
		{"foo~1.6", "1.6.5", true}, // prefix match, by tokens
		{"foo~1.6", "1.6_pre1", true},
		{"foo~1.6", "1.7", false},
		{"foo~1.6", "1.60", false},
		{"foo~=1.6", "1.6.9", true}, // the older spelling
		{"foo<~1.6", "1.5", true},
		{"foo<~1.6", "1.6.3", true},
		{"foo<~1.6", "1.7", false},
		{"foo>~1.6", "1.7", true},
		{"foo>~1.6", "1.5.9", false},
	} {
		d, err := ParseDep(tc.dep)
		if err != nil {
			t.Fatalf("%s: %v", tc.dep, err)
		}
		if got := d.matchesVersion(tc.version); got != tc.want {
			t.Errorf("%s against %s: %v, want %v", tc.dep, tc.version, got, tc.want)
		}
	}
}

func TestParseDep(t *testing.T) {
	for in, want := range map[string]Dep{
		"so:libc.musl-x86_64.so.1": {Name: "so:libc.musl-x86_64.so.1"},
		"cmd:git=2.43.0-r0":        {Name: "cmd:git", Op: "=", Version: "2.43.0-r0"},
		"pc:zlib>=1.2":             {Name: "pc:zlib", Op: ">=", Version: "1.2"},
		"!busybox-suid":            {Name: "busybox-suid", Conflict: true},
		"busybox@edge>1.36":        {Name: "busybox", Tag: "edge", Op: ">", Version: "1.36"},
		"/bin/sh":                  {Name: "/bin/sh"},
		"-foo":                     {},
	} {
		got, err := ParseDep(in)
		if want.Name == "" {
			if err == nil {
				t.Errorf("ParseDep(%q) = %+v, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseDep(%q) = %+v, %v, want %+v", in, got, err, want)
		}
		if err == nil && got.String() != in {
			t.Errorf("%+v prints as %q, want %q", got, got.String(), in)
		}
	}
	for _, bad := range []string{"", "foo>=", "foo>=x", "foo<>1", "foo@", "foo bar", "@x", "foo><Qabc"} {
		if d, err := ParseDep(bad); err == nil {
			t.Errorf("ParseDep(%q) = %+v, want an error", bad, d)
		}
	}
}
