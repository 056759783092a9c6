package lockfiles

import (
	"strings"
	"testing"
)

func packagesLock(filename string) *Lock {
	return &Lock{Images: map[string]*Image{"dev": {
		Name: "dev", Platform: "linux/amd64", InputHash: "sha256:" + strings.Repeat("a", 64),
		Inputs: map[string]*Pin{
			PackagesKey: {Source: "git", Kind: KindDebPackages, Digest: "sha256:" + strings.Repeat("b", 64)},
			"package.git": {Source: "git", Kind: KindDebPackage, Version: "1:2.39.5-0+deb12u2", Architecture: "amd64",
				Filename: filename, SHA256: strings.Repeat("c", 64), Size: "7264824"},
		},
	}}}
}

// TestPackagePins: package pins round-trip, and a pinned file name that
// would leave the repository is rejected when the lock is read.
func TestPackagePins(t *testing.T) {
	l := packagesLock("pool/main/g/git/git_2.39.5-0+deb12u2_amd64.deb")
	back, diags := Parse(Marshal(l), FileName)
	if diags.HasErrors() || !back.Equal(l) {
		t.Fatalf("round trip: %v\n%s", diags, Marshal(l))
	}
	for _, bad := range []string{"../../etc/shadow", "/pool/x.deb", "pool/../x.deb", "https://mirror/pool/x.deb", "pool//x.deb"} {
		_, diags := Parse(Marshal(packagesLock(bad)), FileName)
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "Invalid file name") {
			t.Errorf("filename %q: %v", bad, diags)
		}
	}
	bad := packagesLock("pool/x.deb")
	bad.Images["dev"].Inputs["package.git"].Size = "-1"
	if _, diags := Parse(Marshal(bad), FileName); !diags.HasErrors() {
		t.Error("a negative size was accepted")
	}
}
