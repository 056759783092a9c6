package lockfiles

import (
	"strings"
	"testing"
)

func apkLock(name, filename string) *Lock {
	return &Lock{Images: map[string]*Image{"dev": {
		Name: "dev", Platform: "linux/amd64", InputHash: "sha256:" + strings.Repeat("a", 64),
		Inputs: map[string]*Pin{
			PackagesKey: {Source: name, Kind: KindApkPackages, Digest: "sha256:" + strings.Repeat("b", 64)},
			PackageKeyPrefix + name: {Source: name, Kind: KindApkPackage, Version: "8.1.2-r0", Architecture: "noarch",
				Filename: filename, SHA256: strings.Repeat("c", 64), Size: "51234"},
		},
	}}}
}

// TestApkPackagePins: Alpine package pins round-trip, with names Debian
// does not allow (upper case, "_"); a file name that would leave the
// repository, or a pin missing its size, is refused when read.
func TestApkPackagePins(t *testing.T) {
	l := apkLock("py3-setuptools_scm", "noarch/py3-setuptools_scm-8.1.2-r0.apk")
	back, diags := Parse(Marshal(l), FileName)
	if diags.HasErrors() || !back.Equal(l) {
		t.Fatalf("round trip: %v\n%s", diags, Marshal(l))
	}
	for _, bad := range []string{"../x86_64/git-2.45.2-r0.apk", "/x86_64/git.apk", "https://mirror/x86_64/git.apk"} {
		if _, diags := Parse(Marshal(apkLock("git", bad)), FileName); !diags.HasErrors() || !strings.Contains(diags.Error(), "Invalid file name") {
			t.Errorf("filename %q: %v", bad, diags)
		}
	}
	noSize := apkLock("git", "x86_64/git-2.45.2-r0.apk")
	noSize.Images["dev"].Inputs["package.git"].Size = ""
	if _, diags := Parse(Marshal(noSize), FileName); !diags.HasErrors() || !strings.Contains(diags.Error(), "size") {
		t.Errorf("a pin without its size: %v", diags)
	}
	if _, diags := Parse(Marshal(apkLock("../git", "x86_64/git-2.45.2-r0.apk")), FileName); !diags.HasErrors() {
		t.Error("a package key with a path in it was accepted")
	}
}
