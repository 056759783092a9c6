package rootfs

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/debrepo"
	"github.com/sbx-dev/sbx/internal/build/debrepo/debrepotest"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
)

// hostELF returns the bytes of a host file (following links), for
// packages holding real programs and libraries.
func hostELF(t *testing.T, p string) string {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the fixture packages hold x86-64 programs")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func elfRepo(t *testing.T) *debrepotest.Repo {
	trueBin := hostELF(t, "/usr/bin/true")
	return debrepotest.NewRepo(t, []debrepotest.Package{
		{Name: "hello", Version: "1", Arch: "amd64", Fields: map[string]string{"Depends": "libc6"},
			Files: map[string]string{"usr/bin/hello": trueBin, "usr/bin/hello-sh": "#!/bin/sh\nexit 0\n", "bin/sh": trueBin}},
		{Name: "libc6", Version: "2", Arch: "amd64", Fields: map[string]string{"Depends": "ldso"},
			Files: map[string]string{"lib/x86_64-linux-gnu/libc.so.6": hostELF(t, "/lib/x86_64-linux-gnu/libc.so.6")}},
		{Name: "ldso", Version: "2", Arch: "amd64",
			Files: map[string]string{"lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": hostELF(t, "/lib64/ld-linux-x86-64.so.2"),
				"lib64/ld-linux-x86-64.so.2": "->/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"}},
		{Name: "nolibc", Version: "1", Arch: "amd64", Fields: map[string]string{"Depends": "ldso"},
			Files: map[string]string{"usr/bin/nolibc": trueBin}},
	})
}

func fetchPkgs(t *testing.T, repo *debrepotest.Repo, names ...string) []debrepo.Fetched {
	t.Helper()
	ix := repo.Index(t)
	c := repo.Client(t)
	var out []debrepo.Fetched
	for _, n := range names {
		pin := debrepo.PinOf(ix.Versions(n)[0])
		p, err := c.Download(debrepotest.Ctx(t), []debrepo.Source{repo.Source()}, pin)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, debrepo.Fetched{Pin: pin, Path: p})
	}
	return out
}

// TestAssemblePackages installs packages holding a real program and the
// C library, checks the declared executables (ELF interpreter and
// libraries, a script's interpreter) and records the inventory in
// image.json.
func TestAssemblePackages(t *testing.T) {
	repo := elfRepo(t)
	img := loadImage(t, `image "agent" {
  packages    = ["hello"]
  executables = ["hello", "hello-sh", "/usr/bin/hello"]
}`)
	tree, err := Assemble(context.Background(), img, Inputs{}, Options{Packages: fetchPkgs(t, repo, "libc6", "hello", "ldso")})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	var info imageinfo.Info
	if err := json.Unmarshal([]byte(readTreeString(t, tree, imageinfo.Path)), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Packages) != 3 || info.Packages[0].Name != "hello" || info.Packages[1].Name != "ldso" {
		t.Errorf("packages %+v", info.Packages)
	}
	if len(info.Executables) != 3 || info.Executables[0].Path != "/usr/bin/hello" {
		t.Errorf("executables %+v", info.Executables)
	}
	if !strings.Contains(readTreeString(t, tree, "/var/lib/dpkg/status"), "Package: libc6\nStatus: install ok installed") {
		t.Error("dpkg status lacks libc6")
	}
}

// TestExecutablesMissingLibrary: a program whose shared library is not in
// the image fails the build with an error naming the library; one
// without its ELF interpreter, naming the interpreter; a command that is
// not there, naming where it was looked for.
func TestExecutablesMissingLibrary(t *testing.T) {
	repo := elfRepo(t)
	for _, tc := range []struct {
		exe  string
		pkgs []string
		want string
	}{
		{"nolibc", []string{"nolibc", "ldso"}, "shared library libc.so.6, needed by /usr/bin/nolibc, is not in the image"},
		{"hello", []string{"hello", "libc6"}, "ELF interpreter /lib64/ld-linux-x86-64.so.2 is not in the image"},
		{"git", []string{"nolibc", "ldso"}, "not found in /usr/local/sbin/git"},
	} {
		img := loadImage(t, `image "agent" {
  packages    = ["x-`+tc.exe+`"]
  executables = ["`+tc.exe+`"]
}`)
		_, err := Assemble(context.Background(), img, Inputs{}, Options{Packages: fetchPkgs(t, repo, tc.pkgs...)})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "executable "+tc.exe) {
			t.Errorf("%s: Assemble = %v\nwant %q", tc.exe, err, tc.want)
		}
	}
}

func readTreeString(t *testing.T, tree *layers.Tree, p string) string {
	t.Helper()
	b, err := readTree(tree, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
