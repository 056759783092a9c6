package lang

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalSourcesConfined loads an image whose sources read a key from
// the user's home through "..", and checks the error names the spec file,
// line and path; then checks that host_paths lets a listed directory in and
// that LocalRoot confines each source to its root.
func TestLocalSourcesConfined(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": `
image "a" {
  artifact "key" {
    source = "file:../../.ssh/id_rsa"
    dest   = "/root/key"
  }
}
`})
	_, diags := Load(dir, Options{})
	if !diags.HasErrors() {
		t.Fatal("a file: source reading ../../.ssh/id_rsa loaded without error")
	}
	d := diags[0]
	if d.Subject == nil || filepath.Base(d.Subject.Filename) != "main.hcl" || d.Subject.Start.Line != 4 {
		t.Errorf("error at %v, want main.hcl:4", d.Subject)
	}
	if !strings.Contains(d.Detail, "../../.ssh/id_rsa") || !strings.Contains(d.Detail, "host_paths") {
		t.Errorf("error detail %q does not name the path and the opt-in", d.Detail)
	}

	dir = writeDir(t, map[string]string{"main.hcl": `
image "a" {
  host_paths = ["/opt/models", "../shared"]
  base = "oci-layout:../shared/layout:v1"
  artifact "model" {
    source = "file:/opt/models/sub/llm.bin"
    dest   = "/models/llm.bin"
  }
  artifact "local" {
    source = "file:files/motd"
    dest   = "/etc/motd"
  }
}
`})
	cfg := mustLoad(t, dir, Options{})
	img := cfg.Images["a"]
	for _, c := range []struct {
		src       *Source
		hostPath  string
		root, rel string
	}{
		{img.Base, "../shared", filepath.Join(filepath.Dir(dir), "shared"), "layout"},
		{img.Artifacts[0].Source, "/opt/models", "/opt/models", "sub/llm.bin"},
		{img.Artifacts[1].Source, "", dir, "files/motd"},
	} {
		if c.src.HostPath != c.hostPath {
			t.Errorf("%s: HostPath = %q, want %q", c.src.Raw, c.src.HostPath, c.hostPath)
		}
		root, rel, err := c.src.LocalRoot(cfg.Dir)
		if err != nil {
			t.Errorf("%s: LocalRoot: %v", c.src.Raw, err)
			continue
		}
		if root != c.root || rel != c.rel {
			t.Errorf("%s: LocalRoot = %q, %q; want %q, %q", c.src.Raw, root, rel, c.root, c.rel)
		}
	}

	// A Source made without Load, or whose host path does not hold it, is
	// refused rather than read from wherever it points.
	for _, src := range []*Source{
		{Kind: SourceFile, Raw: "file:/etc/shadow", Ref: "/etc/shadow"},
		{Kind: SourceFile, Raw: "file:../x", Ref: "../x"},
		{Kind: SourceFile, Raw: "file:/opt/modelsx/y", Ref: "/opt/modelsx/y", HostPath: "/opt/models"},
	} {
		if root, rel, err := src.LocalRoot(dir); err == nil {
			t.Errorf("%s: LocalRoot = %q, %q; want an error", src.Raw, root, rel)
		}
	}
}
