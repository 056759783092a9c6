package lockfiles

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Well-formed hashes, distinct so a swapped field shows.
var (
	digestA   = "sha256:" + strings.Repeat("a1", 32)
	digestB   = "sha256:" + strings.Repeat("b2", 32)
	digestC   = "sha256:" + strings.Repeat("c3", 32)
	hexD      = strings.Repeat("d4", 32)
	hexE      = strings.Repeat("e5", 32)
	integrity = "sha512-" + strings.Repeat("q83v", 21) + "qw=="
)

// sample covers every source kind, every pin attribute, a source string
// that needs escaping, outputs, and an image with no inputs.
func sample() *Lock {
	return &Lock{Images: map[string]*Image{
		"agent": {
			Name:      "agent",
			Platform:  "linux/amd64",
			InputHash: digestA,
			Inputs: map[string]*Pin{
				"base":             {Source: "registry.example.com/library/alpine:3.23", Kind: "oci", Digest: digestB, Manifest: digestC},
				"kernel":           {Source: "deb:linux-image-amd64=6.12.57-1", Kind: "deb", Version: "6.12.57-1", SHA256: hexD, Filename: "linux-image-amd64_6.12.57-1_amd64.deb"},
				"artifact.claude":  {Source: "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3", Kind: "npm", Version: "2.1.3", Integrity: integrity, SHA256: hexE},
				"artifact.moltnet": {Source: "https://example.com/moltnet_linux_amd64.tar.gz", Kind: "url", SHA256: hexD},
				"artifact.tool":    {Source: "file:./bin/tool", Kind: "file", SHA256: hexE},
				"artifact.layout":  {Source: "oci-layout:./layout@" + digestA, Kind: "oci-layout", Digest: digestA, Manifest: digestB},
				"artifact.odd":     {Source: "https://example.com/a\"b\\c${x}%{y}", Kind: "url", SHA256: hexE},
			},
			Outputs: map[string]string{"disk": digestA, "initramfs": digestB, "kernel": digestC},
		},
		"bare": {Name: "bare", Platform: "linux/arm64/v8", InputHash: digestC},
	}}
}

func TestRoundTrip(t *testing.T) {
	l := sample()
	data := Marshal(l)
	back, diags := Parse(data, FileName)
	if diags.HasErrors() {
		t.Fatalf("Parse(Marshal(l)): %s\n%s", diags.Error(), data)
	}
	if diff := cmp.Diff(l, back); diff != "" {
		t.Errorf("Parse(Marshal(l)) differs (-want +got):\n%s", diff)
	}
	if !back.Equal(l) {
		t.Errorf("Equal is false for a round-tripped lock")
	}
	if again := Marshal(back); !bytes.Equal(again, data) {
		t.Errorf("Marshal is not byte-stable:\n%s\nthen\n%s", data, again)
	}
	if formatted := hclwrite.Format(data); !bytes.Equal(formatted, data) {
		t.Errorf("hclwrite.Format changes the canonical form:\n%s", formatted)
	}
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		lock *Lock
	}{
		{"full.hcl", sample()},
		{"empty.hcl", &Lock{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			got := Marshal(tc.lock)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./lockfiles -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal differs from %s (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
			}
			l, diags := Read(path)
			if diags.HasErrors() {
				t.Fatalf("Read(%s): %s", path, diags.Error())
			}
			if !l.Equal(tc.lock) {
				t.Errorf("Read(%s) differs:\n%s", path, cmp.Diff(tc.lock, l))
			}
		})
	}
}

func TestMarshalOrderIndependent(t *testing.T) {
	// Maps iterate in random order; many renderings must agree.
	want := Marshal(sample())
	for i := 0; i < 20; i++ {
		if got := Marshal(sample()); !bytes.Equal(got, want) {
			t.Fatalf("rendering %d differs:\n%s", i, cmp.Diff(string(want), string(got)))
		}
	}
}

func TestMarshalNilAndEmpty(t *testing.T) {
	if !bytes.Equal(Marshal(nil), []byte(header)) {
		t.Errorf("Marshal(nil) = %q, want the header alone", Marshal(nil))
	}
	if !bytes.Equal(Marshal(&Lock{Images: map[string]*Image{}}), []byte(header)) {
		t.Errorf("Marshal(empty) is not the header alone")
	}
	l, diags := Parse([]byte(header), FileName)
	if diags.HasErrors() || l == nil || len(l.Images) != 0 {
		t.Errorf("Parse(header) = %v, %s; want an empty lock", l, diags.Error())
	}
}

// TestInvalid breaks the canonical full.hcl by hand, one way per case, and
// checks the first error's line and text.
func TestInvalid(t *testing.T) {
	canonical := string(Marshal(sample()))
	replace := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				panic("fixture text not found: " + old)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	lineOf := func(needle string) int {
		i := strings.Index(canonical, needle)
		if i < 0 {
			panic("fixture text not found: " + needle)
		}
		return strings.Count(canonical[:i], "\n") + 1
	}
	for _, tc := range []struct {
		name string
		edit func(string) string
		line int
		want string
	}{
		{"syntax error", replace(`platform   = "linux/amd64"`, `platform   = "linux/amd64`), lineOf(`platform   = "linux/amd64"`), "Invalid multi-line string"},
		{"unknown top-level block", func(s string) string { return s + "\nprovider \"x\" {\n}\n" }, strings.Count(canonical, "\n") + 2, `"provider" blocks are not expected`},
		{"top-level attribute", func(s string) string { return s + "\nversion = \"1\"\n" }, strings.Count(canonical, "\n") + 2, `"version" is not expected`},
		{"unknown image attribute", replace(`  platform   = "linux/amd64"`, "  platform   = \"linux/amd64\"\n  size = \"4GiB\""), lineOf(`platform   = "linux/amd64"`) + 1, `"size" is not expected`},
		{"unknown pin attribute", replace(`    kind     = "oci"`, "    kind     = \"oci\"\n    url = \"x\""), lineOf(`kind     = "oci"`) + 1, `"url" is not expected`},
		{"attribute not for kind", replace(`    kind     = "oci"`, "    kind     = \"oci\"\n    sha256 = \""+hexD+"\""), lineOf(`kind     = "oci"`) + 1, `A pin of kind "oci" has no sha256`},
		{"expression", replace(`platform   = "linux/amd64"`, `platform   = var.platform`), lineOf(`platform   = "linux/amd64"`), "must be a quoted string literal"},
		{"template", replace(`platform   = "linux/amd64"`, `platform   = "linux/${arch}"`), lineOf(`platform   = "linux/amd64"`), "must be a quoted string literal"},
		{"number", replace(`version   = "2.1.3"`, `version   = 2`), lineOf(`version   = "2.1.3"`), "must be a quoted string literal"},
		{"empty value", replace(`version   = "2.1.3"`, `version   = ""`), lineOf(`version   = "2.1.3"`), "version is empty"},
		{"duplicate image", func(s string) string {
			return s + "\nimage \"bare\" {\n  platform   = \"linux/amd64\"\n  input_hash = \"" + digestA + "\"\n}\n"
		}, strings.Count(canonical, "\n") + 2, "Duplicate image block"},
		{"duplicate input", replace(`  input "base" {`, "  input \"kernel\" {"), lineOf(`input "kernel" {`), "Duplicate input block"},
		{"duplicate attribute", replace(`    kind     = "oci"`, "    kind     = \"oci\"\n    kind = \"oci\""), lineOf(`kind     = "oci"`) + 1, "Attribute redefined"},
		{"duplicate output", replace(`    initramfs = `, `    disk = `), lineOf(`initramfs = `), "Duplicate output"},
		{"bad input key", replace(`input "base" {`, `input "rootfs" {`), lineOf(`input "base" {`), `"rootfs" is not an input key`},
		{"bad image name", replace(`image "bare" {`, `image "1bare" {`), lineOf(`image "bare" {`), "Invalid image name"},
		{"two labels", replace(`image "bare" {`, `image "bare" "x" {`), lineOf(`image "bare" {`), "exactly one label"},
		{"missing input_hash", replace("  input_hash = \""+digestC+"\"\n", ""), lineOf(`image "bare" {`), "has no input_hash"},
		{"missing source", replace("    source   = \"registry.example.com/library/alpine:3.23\"\n", ""), lineOf(`input "base" {`), "has no source"},
		{"missing digest for kind", replace("    digest   = \""+digestB+"\"\n", ""), lineOf(`input "base" {`), "has no digest"},
		{"unknown kind", replace(`kind     = "oci"`, `kind     = "git"`), lineOf(`kind     = "oci"`), `"git" is not a source kind`},
		{"short digest", replace(`digest   = "`+digestB+`"`, `digest   = "sha256:abc"`), lineOf(`digest   = "` + digestB + `"`), `not a digest of the form`},
		{"upper-case digest", replace(`digest   = "`+digestB+`"`, `digest   = "`+strings.ToUpper(digestB)+`"`), lineOf(`digest   = "` + digestB + `"`), `not a digest of the form`},
		{"sha512 digest", replace(`input_hash = "`+digestA+`"`, `input_hash = "sha512:`+strings.Repeat("ab", 32)+`"`), lineOf(`input_hash = "` + digestA + `"`), `not a digest of the form`},
		{"prefixed sha256", replace(`sha256    = "`+hexE+`"`, `sha256    = "sha256:`+hexE+`"`), lineOf(`sha256    = "` + hexE + `"`), "not a sha256 of 64"},
		{"sha1 integrity", replace(integrity, "sha1-"+strings.Repeat("A", 27)+"="), lineOf(integrity), "not an integrity value"},
		{"short integrity", replace(integrity, "sha512-AAAA"), lineOf(integrity), "not an integrity value"},
		{"bad platform", replace(`"linux/arm64/v8"`, `"linux"`), lineOf(`"linux/arm64/v8"`), `platform "linux" must be`},
		{"file name with host", replace(`"linux-image-amd64_6.12.57-1_amd64.deb"`, `"mirror.example/pool/x.deb"`), lineOf(`"linux-image-amd64_6.12.57-1_amd64.deb"`), "bare file name"},
		{"outputs not an object", func(s string) string {
			i := strings.Index(s, "  outputs = {")
			j := i + strings.Index(s[i:], "  }\n") + len("  }\n")
			return s[:i] + "  outputs = [\"disk\"]\n" + s[j:]
		}, lineOf("outputs = {"), "outputs must be an object"},
		{"bad output hash", replace(`kernel    = "`+digestC+`"`, `kernel    = "deadbeef"`), lineOf(`kernel    = "` + digestC + `"`), `Output "kernel"`},
		{"nested block in pin", replace(`    kind     = "oci"`, "    kind     = \"oci\"\n    extra {\n    }"), lineOf(`kind     = "oci"`) + 1, "no nested blocks"},

		// Structurally valid but not what Marshal writes.
		{"comment", replace(`image "bare" {`, "# pinned by hand\nimage \"bare\" {"), lineOf(`image "bare" {`), `sbx.lock.hcl is not in canonical form (was it edited by hand?); run sbx lock to regenerate`},
		{"no header", func(s string) string { return strings.TrimPrefix(s, header) }, 1, "not in canonical form"},
		{"unaligned", replace(`platform   = "linux/amd64"`, `platform = "linux/amd64"`), lineOf(`platform   = "linux/amd64"`), `would write "  platform   = \"linux/amd64\""`},
		{"images unsorted", func(s string) string {
			i := strings.Index(s, `image "bare"`)
			bare := s[i:]
			rest := strings.TrimSuffix(s[len(header)+1:i], "\n")
			return header + "\n" + bare + "\n" + rest
		}, lineOf(`image "agent" {`), "not in canonical form"},
		{"inputs unsorted", func(s string) string {
			a := strings.Index(s, `  input "artifact.claude"`)
			b := strings.Index(s, `  input "artifact.layout"`)
			block := s[a:b]
			s = s[:a] + s[b:]
			j := strings.Index(s, `  input "base"`)
			return s[:j] + block + s[j:]
		}, lineOf(`input "artifact.claude"`), "not in canonical form"},
		{"attributes reordered", replace("    digest   = \""+digestB+"\"\n    manifest = \""+digestC+"\"\n", "    manifest = \""+digestC+"\"\n    digest   = \""+digestB+"\"\n"), lineOf(`digest   = "` + digestB + `"`), "not in canonical form"},
		{"crlf", func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }, 1, "ends differently"},
		{"missing final newline", func(s string) string { return strings.TrimSuffix(s, "\n") }, strings.Count(canonical, "\n"), "ends differently"},
		{"extra blank line", func(s string) string { return s + "\n" }, strings.Count(canonical, "\n") + 1, "sbx lock would end the file before it"},
		{"missing blank line", replace("\n\nimage \"bare\"", "\nimage \"bare\""), lineOf(`image "bare" {`) - 1, `would write ""`},
		{"quoted output key", replace(`    disk      = `, `    "disk"    = `), lineOf(`disk      = `), "not in canonical form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.edit(canonical)
			l, diags := Parse([]byte(src), "dir/"+FileName)
			if !diags.HasErrors() {
				t.Fatalf("Parse accepted:\n%s", src)
			}
			if l != nil {
				t.Errorf("Parse returned a lock along with errors")
			}
			d := firstError(diags)
			if d.Subject == nil {
				t.Fatalf("error has no source range: %s", d.Error())
			}
			if d.Subject.Filename != "dir/"+FileName || d.Subject.Start.Line != tc.line {
				t.Errorf("error at %s, want line %d: %s", d.Subject, tc.line, d.Error())
			}
			if !strings.Contains(d.Summary+": "+d.Detail, tc.want) {
				t.Errorf("error %q does not contain %q", d.Summary+": "+d.Detail, tc.want)
			}
		})
	}
}

func firstError(diags hcl.Diagnostics) *hcl.Diagnostic {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			return d
		}
	}
	return nil
}

func TestEqual(t *testing.T) {
	if !(*Lock)(nil).Equal(&Lock{}) || !(&Lock{Images: map[string]*Image{}}).Equal(nil) {
		t.Errorf("a nil lock must equal an empty one")
	}
	if !sample().Equal(sample()) {
		t.Errorf("equal samples compare unequal")
	}
	for name, mutate := range map[string]func(*Lock){
		"image added":     func(l *Lock) { l.Images["new"] = &Image{Name: "new", Platform: "linux/amd64", InputHash: digestA} },
		"image removed":   func(l *Lock) { delete(l.Images, "bare") },
		"platform":        func(l *Lock) { l.Images["bare"].Platform = "linux/amd64" },
		"input hash":      func(l *Lock) { l.Images["bare"].InputHash = digestA },
		"input removed":   func(l *Lock) { delete(l.Images["agent"].Inputs, "base") },
		"pin source":      func(l *Lock) { l.Images["agent"].Inputs["base"].Source += "x" },
		"pin digest":      func(l *Lock) { l.Images["agent"].Inputs["base"].Digest = digestA },
		"pin filename":    func(l *Lock) { l.Images["agent"].Inputs["kernel"].Filename = "x.deb" },
		"output changed":  func(l *Lock) { l.Images["agent"].Outputs["disk"] = digestC },
		"output removed":  func(l *Lock) { delete(l.Images["agent"].Outputs, "disk") },
		"outputs emptied": func(l *Lock) { l.Images["agent"].Outputs = nil },
	} {
		l := sample()
		mutate(l)
		if l.Equal(sample()) || sample().Equal(l) {
			t.Errorf("%s: Equal still true", name)
		}
	}
}

func TestReadMissing(t *testing.T) {
	l, diags := Read(filepath.Join(t.TempDir(), FileName))
	if l != nil || diags != nil {
		t.Errorf("Read(missing) = %v, %v; want nil, nil", l, diags)
	}
	if l.Lookup("agent") != nil {
		t.Errorf("Lookup on a nil lock must be nil")
	}
}

func TestReadDirectory(t *testing.T) {
	dir := t.TempDir()
	_, diags := Read(dir)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), dir) {
		t.Errorf("Read(directory) = %v; want an error naming it", diags)
	}
}

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := Write(path, sample()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	l, diags := Read(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if !l.Equal(sample()) {
		t.Errorf("Read after Write differs:\n%s", cmp.Diff(sample(), l))
	}
	// Overwrite with different content.
	next := sample()
	delete(next.Images, "agent")
	if err := Write(path, next); err != nil {
		t.Fatal(err)
	}
	if l, _ := Read(path); !l.Equal(next) {
		t.Errorf("second Write did not replace the file")
	}
	assertOnly(t, filepath.Dir(path), FileName)
}

func TestWriteRefusesInvalid(t *testing.T) {
	for name, mutate := range map[string]func(*Lock){
		"bad digest":         func(l *Lock) { l.Images["agent"].Inputs["base"].Digest = "sha256:abc" },
		"name mismatch":      func(l *Lock) { l.Images["agent"].Name = "other" },
		"nil image":          func(l *Lock) { l.Images["x"] = nil },
		"nil pin":            func(l *Lock) { l.Images["agent"].Inputs["base"] = nil },
		"invalid UTF-8":      func(l *Lock) { l.Images["agent"].Inputs["base"].Source = "alpine\xff" },
		"unknown kind":       func(l *Lock) { l.Images["agent"].Inputs["base"].Kind = "git" },
		"missing input hash": func(l *Lock) { l.Images["bare"].InputHash = "" },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			old := []byte("old content\n")
			if err := os.WriteFile(path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			l := sample()
			mutate(l)
			err := Write(path, l)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("Write = %v; want an error naming %s", err, path)
			}
			assertContent(t, path, old)
			assertOnly(t, dir, FileName)
		})
	}
}

func TestWriteRenameFailureKeepsTarget(t *testing.T) {
	// Renaming a file over a non-empty directory fails on every platform,
	// even for root: the directory and its content stay.
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(path, "keep")
	if err := os.WriteFile(inner, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, sample()); err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	assertContent(t, inner, []byte("keep\n"))
	assertOnly(t, dir, FileName)
}

func TestWriteMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", FileName)
	err := Write(path, sample())
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write = %v; want an error naming %s", err, path)
	}
}

func assertContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

// assertOnly checks that dir holds exactly the named entries (no
// temporary files left behind).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff(names, got); diff != "" {
		t.Errorf("%s holds other files (-want +got):\n%s", dir, diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Marshal(sample()))
	f.Add(Marshal(nil))
	f.Add([]byte("image \"a\" {\n  platform = \"linux/amd64\"\n}\n"))
	f.Add([]byte("image \"a\" {\n  outputs = { disk = \"x\", \"k\" = 1 }\n}\n"))
	f.Add([]byte("image \"a\" { input \"base\" { source = \"${x}\" } }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		l, diags := Parse(src, FileName)
		if diags.HasErrors() {
			if l != nil {
				t.Fatalf("Parse returned a lock with errors")
			}
			return
		}
		if l == nil {
			t.Fatalf("Parse returned neither a lock nor an error")
		}
		if got := Marshal(l); !bytes.Equal(got, src) {
			t.Fatalf("Parse accepted bytes that Marshal renders differently:\n%q\n%q", src, got)
		}
		back, diags := Parse(Marshal(l), FileName)
		if diags.HasErrors() || !back.Equal(l) {
			t.Fatalf("round trip failed: %v", diags)
		}
	})
}
