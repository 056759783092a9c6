package apt

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestParsePolicy reads apt-cache policy's output: a version only the
// dpkg status file lists (installed, no longer offered) is not available
// for download.
func TestParsePolicy(t *testing.T) {
	const out = `ca-certificates:
  Installed: 20210119
  Candidate: 20250419~deb12u2
  Version table:
     20250419~deb12u2 500
        500 https://mirror.invalid/debian-security bookworm-security/main amd64 Packages
     20230311+deb12u1 500
        500 https://mirror.invalid/debian bookworm/main amd64 Packages
        500 https://mirror.invalid/debian bookworm-updates/main amd64 Packages
 *** 20210119 100
        100 /var/lib/dpkg/status
`
	candidate, available := parsePolicy(out)
	if candidate != "20250419~deb12u2" || strings.Join(available, " ") != "20250419~deb12u2 20230311+deb12u1" {
		t.Errorf("parsePolicy = %q, %q", candidate, available)
	}
	candidate, available = parsePolicy("mail-transport-agent:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n")
	if candidate != "" || len(available) != 0 {
		t.Errorf("a virtual package: %q, %q", candidate, available)
	}
	if candidate, available = parsePolicy(""); candidate != "" || available != nil {
		t.Errorf("an unknown package: %q, %q", candidate, available)
	}
}

// Without apt-get or apt-cache on PATH, the error says what deb: sources
// need.
func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := (&Get{}).Download(context.Background(), "busybox-static", "1:1.35.0-4+b3", t.TempDir())
	want := "deb: sources are downloaded with the host's apt-get, which is not on PATH: run sbx lock and build for images with deb: sources on a Debian or Ubuntu host"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Download: err = %v\nwant it to begin %q", err, want)
	}
	_, _, err = (&Get{}).Versions(context.Background(), "busybox-static")
	want = "deb: sources without an exact version are resolved with the host's apt-cache, which is not on PATH"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Versions: err = %v\nwant it to begin %q", err, want)
	}
}

// TestGetReal lists and downloads a real package through this machine's
// apt: the candidate Versions names is the file Download writes, with no
// version and with it.
func TestGetReal(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		if os.Getenv("SBX_TEST_REQUIRE_APT") != "" {
			t.Fatal("apt-get is not installed (SBX_TEST_REQUIRE_APT is set)")
		}
		t.Skip("SKIPPED: apt-get is not installed; the real apt client is untested on this machine")
	}
	ctx := context.Background()
	a := &Get{}
	candidate, available, err := a.Versions(ctx, "busybox-static")
	if err != nil {
		t.Fatal(err)
	}
	if candidate == "" {
		t.Skip("SKIPPED: apt has no candidate for busybox-static (run apt-get update?)")
	}
	if len(available) == 0 || available[0] == "" {
		t.Errorf("available = %q", available)
	}
	file := "busybox-static_" + strings.ReplaceAll(candidate, ":", "%3a") + "_"
	for _, version := range []string{"", candidate} {
		dir := t.TempDir()
		p, err := a.Download(ctx, "busybox-static", version, dir)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(p) != dir || !strings.HasPrefix(filepath.Base(p), file) {
			t.Errorf("version %q: downloaded %s, want %s* in %s", version, p, file, dir)
		}
	}
	if _, err := a.Download(ctx, "busybox-static", "0:0.0-no-such-version", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "apt-get download busybox-static=0:0.0-no-such-version") {
		t.Errorf("err = %v, want apt-get's failure", err)
	}
}
