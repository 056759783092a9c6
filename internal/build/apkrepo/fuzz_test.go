package apkrepo

import (
	"bytes"
	"strings"
	"testing"
)

const sampleIndex = `C:Q1Z2ESChS7RRxV+3rhNAgGqKQu0dU=
P:git
V:2.43.0-r0
A:x86_64
S:1305
I:37
T:distributed version control system
U:https://git-scm.example/
L:GPL-2.0-or-later
o:git
m:Someone <someone@test.invalid>
t:1700000000
c:0123456789abcdef0123456789abcdef01234567
k:10
D:musl>=1.2.5 so:libc.musl-x86_64.so.1 !git-old /bin/sh
p:cmd:git=2.43.0-r0 cmd:git-shell=2.43.0-r0
i:git docs

C:Q1sLyv/GsSuJcVxckLTFKEFfmQ7Z4=
P:musl
V:1.2.5-r0
A:x86_64
S:1102
I:17
p:so:libc.musl-x86_64.so.1=1
F:lib
R:ld-musl-x86_64.so.1
a:0:0:755
Z:Q1AMGDpOkWb7QqHaZk6UsKtaTriW8=

`

// FuzzParseIndex checks that any input parses or fails without panic,
// and that whatever parses holds only what the parser promises: a name,
// a valid version, a well-formed identity, and dependencies that print
// back to what parses to the same.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(sampleIndex))
	f.Add([]byte("P:x\nV:1\nC:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte("P:x\n\n\nV:1\n"))
	f.Add([]byte("D:a<1 b>~2 c~=3 !d e@tag><Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:x\nV:1_rc1-r0\nC:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, installed := range []bool{false, true} {
			pkgs, err := parseRecords(bytes.NewReader(data), installed)
			if err != nil {
				continue
			}
			for _, p := range pkgs {
				if !validPackageName(p.Name) || !ValidVersion(p.Version) || p.Arch != "" && !validArch(p.Arch) || strings.ContainsAny(p.Filename(), "\\?#%") || strings.Contains(p.Filename(), "..") {
					t.Fatalf("parsed %q %q", p.Name, p.Version)
				}
				if !installed && (len(p.Checksum) != 30 || !strings.HasPrefix(p.Checksum, "Q1")) {
					t.Fatalf("parsed checksum %q", p.Checksum)
				}
				for _, d := range append(append([]Dep(nil), p.Depends...), p.InstallIf...) {
					again, err := ParseDep(d.String())
					if err != nil || again != d {
						t.Fatalf("dependency %+v prints as %q, which parses to %+v, %v", d, d.String(), again, err)
					}
				}
			}
		}
	})
}

// FuzzCompareVersions checks that the ordering is antisymmetric and
// reflexive for any pair of strings, valid or not.
func FuzzCompareVersions(f *testing.F) {
	for _, s := range []string{"1.0", "1.0a", "1.0_rc1", "1.0-r1", "1.0~ab", "1.01", "0.1.0_alpha_pre2", "2.3.0b-r4"} {
		f.Add(s, "1.0")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := CompareVersions(a, b), CompareVersions(b, a)
		if ab != -ba {
			t.Fatalf("Compare(%q, %q) = %d but Compare(%q, %q) = %d", a, b, ab, b, a, ba)
		}
		if CompareVersions(a, a) != 0 {
			t.Fatalf("Compare(%q, %q) != 0", a, a)
		}
	})
}

// FuzzVerifyIndex feeds arbitrary bytes to the index and package
// verifiers: they must refuse them without panic (no key signs them).
func FuzzVerifyIndex(f *testing.F) {
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, _, err := VerifyIndex(data, Keys{}); err == nil {
			t.Fatal("verified with no keys")
		}
		if _, err := VerifyPackage(data, Keys{}, "", "fuzz"); err == nil {
			t.Fatal("verified with no keys")
		}
	})
}
