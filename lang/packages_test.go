package lang

import (
	"strings"
	"testing"
)

func TestImagePackages(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.sbx.hcl": `
image "dev" {
  packages     = ["git", "ca-certificates", "curl (>= 7.88)", "libc6=2.36-9+deb12u10"]
  repositories = ["deb [signed-by=/k.gpg] https://repo.test/debian bookworm main"]
  keyring      = "keys/archive.gpg"
  executables  = ["git", "/usr/bin/curl"]
}
`})
	cfg := mustLoad(t, dir, Options{})
	p := cfg.Images["dev"].Packages
	if strings.Join(p.Requests, "|") != "git|ca-certificates|curl (>= 7.88)|libc6=2.36-9+deb12u10" {
		t.Errorf("requests %q", p.Requests)
	}
	if len(p.Repositories) != 1 || p.Keyring != "keys/archive.gpg" || strings.Join(p.Executables, "|") != "git|/usr/bin/curl" {
		t.Errorf("packages %+v", p)
	}
}

// TestImageApkRepositories: an Alpine image names repositories as
// /etc/apk/repositories does, tagged or not.
func TestImageApkRepositories(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.sbx.hcl": `
image "dev" {
  packages     = ["git", "curl>=8"]
  repositories = ["https://repo.test/alpine/v3.20/main", "@edge https://repo.test/alpine/edge/main"]
  keyring      = "keys/repo.rsa.pub"
}
`})
	p := mustLoad(t, dir, Options{}).Images["dev"].Packages
	if strings.Join(p.Repositories, "|") != "https://repo.test/alpine/v3.20/main|@edge https://repo.test/alpine/edge/main" || strings.Join(p.Requests, "|") != "git|curl>=8" {
		t.Errorf("packages %+v", p)
	}
}

func TestImagePackagesInvalid(t *testing.T) {
	for spec, want := range map[string]string{
		`packages = ["Git"]`:                           "Invalid package",
		`packages = ["git", "git (>= 2)"]`:             "Duplicate package",
		`packages = ["git (~ 2)"]`:                     "Invalid package",
		`packages = ["git >= 2; rm"]`:                  "Invalid package",
		`packages = ["git (>= 2"]`:                     "Invalid package",
		`repositories = ["deb https://x.test s main"]`: "Repositories without packages",
		`packages = ["git"]
  repositories = ["ftp://x.test/alpine/main"]`: "Invalid repository",
		`packages = ["git"]
  repositories = ["https://x.test/a https://x.test/b"]`: "Invalid repository",
		`packages = ["git"]
  repositories = ["https://x.test/alpine/main", "deb https://x.test s main"]`: "Mixed repositories",
		`executables = ["bin/git"]`:     "Invalid executable",
		`executables = ["/usr/../bin"]`: "Invalid executable",
	} {
		dir := writeDir(t, map[string]string{"main.sbx.hcl": "image \"dev\" {\n  " + spec + "\n}\n"})
		_, diags := Load(dir, Options{})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) {
			t.Errorf("%s: diagnostics %v, want %q", spec, diags, want)
		}
	}
}
