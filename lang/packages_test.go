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

func TestImagePackagesInvalid(t *testing.T) {
	for spec, want := range map[string]string{
		`packages = ["Git"]`:                           "Invalid package",
		`packages = ["git", "git (>= 2)"]`:             "Duplicate package",
		`packages = ["git (~ 2)"]`:                     "Invalid package",
		`packages = ["git >= 2; rm"]`:                  "Invalid package",
		`packages = ["git (>= 2"]`:                     "Invalid package",
		`repositories = ["deb https://x.test s main"]`: "Repositories without packages",
		`packages = ["git"]
  repositories = ["https://x.test"]`: "Invalid repository",
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
