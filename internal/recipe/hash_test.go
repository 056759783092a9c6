package recipe

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

func src(kind lang.SourceKind, raw string, line int) *lang.Source {
	return &lang.Source{Kind: kind, Raw: raw, Ref: raw, Range: hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: line}}}
}

// sampleImage sets every field of lang.Image to a non-zero value.
func sampleImage() *lang.Image {
	return &lang.Image{
		Name:     "agent",
		Platform: lang.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"},
		Base:     src(lang.SourceOCI, "registry.example.com/library/alpine:3.23", 3),
		Size:     4 << 30,
		Kernel: &lang.Kernel{
			Source:  src(lang.SourceDeb, "deb:linux-image-amd64=6.12.57-1", 6),
			File:    "boot/vmlinuz-*",
			Modules: []string{"virtio_blk", "9pnet_fd"},
			Cmdline: "console=ttyS0",
		},
		Artifacts: []*lang.Artifact{
			{Name: "moltnet", Source: &lang.Source{Kind: lang.SourceURL, Raw: "https://example.com/moltnet.tar.gz", SHA256: strings.Repeat("d4", 32)}, File: "moltnet", Dest: "/usr/local/bin/moltnet", Mode: 0o755, UID: 0, GID: 0},
			{Name: "claude", Source: src(lang.SourceNPM, "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3", 10), File: "package/claude", Dest: "/usr/local/bin/claude", Extract: false, Mode: 0o755, UID: 501, GID: 20},
			{Name: "tree", Source: src(lang.SourceFile, "file:./tree.tar", 20), Dest: "/opt/tree", Extract: true, Mode: 0o644, UID: 2, GID: 3},
		},
		Users: []*lang.User{
			{Name: "agent", UID: 501, GID: 501, Home: "/home/agent", Shell: "/bin/sh", Groups: []string{"wheel", "kvm"}},
			{Name: "builder", UID: 502, GID: 100, Home: "/home/builder", Shell: "/bin/ash", Groups: []string{"users"}},
		},
		Files: []*lang.File{
			{Path: "/etc/motd", Content: "sandbox\n", Mode: 0o644, UID: 0, GID: 0},
			{Path: "/etc/agent.conf", Content: "x=1\n", Mode: 0o600, UID: 501, GID: 501},
		},
		Env:       map[string]string{"LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin"},
		Symlinks:  map[string]string{"/bin/sh": "busybox"},
		DeclRange: hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 1}},
	}
}

// samplePins sets every Pin field somewhere.
func samplePins() map[string]*lockfiles.Pin {
	h := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	return map[string]*lockfiles.Pin{
		"base":             {Source: "registry.example.com/library/alpine:3.23", Kind: "oci", Digest: h("1"), Manifest: h("2")},
		"kernel":           {Source: "deb:linux-image-amd64=6.12.57-1", Kind: "deb", Version: "6.12.57-1", SHA256: strings.Repeat("3", 64), Filename: "linux-image-amd64_6.12.57-1_amd64.deb"},
		"artifact.claude":  {Source: "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3", Kind: "npm", Version: "2.1.3", Integrity: "sha512-" + strings.Repeat("A", 86) + "==", SHA256: strings.Repeat("4", 64)},
		"artifact.moltnet": {Source: "https://example.com/moltnet.tar.gz", Kind: "url", SHA256: strings.Repeat("d4", 32)},
		"artifact.tree":    {Source: "file:./tree.tar", Kind: "file", SHA256: strings.Repeat("5", 64)},
	}
}

func mustHash(t *testing.T, img *lang.Image, pins map[string]*lockfiles.Pin) string {
	t.Helper()
	h, err := InputHash(img, pins)
	if err != nil {
		t.Fatalf("InputHash: %v", err)
	}
	return h
}

// TestInputHashGolden pins the encoding. The value was computed once from
// sampleImage and samplePins; if this test fails, the encoding changed and
// every lock's input hash with it. Change encodingVersion when that is
// intended, then update the value here.
func TestInputHashGolden(t *testing.T) {
	const want = "sha256:34adac65182c75de0de593b1d9fce83f38817deca1dd599e2014ef57e330fa72"
	if got := mustHash(t, sampleImage(), samplePins()); got != want {
		t.Errorf("InputHash = %s, want %s", got, want)
	}
}

func TestInputHashForm(t *testing.T) {
	h := mustHash(t, sampleImage(), samplePins())
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		t.Errorf("InputHash = %q, want sha256:<64 hex>", h)
	}
	empty := mustHash(t, &lang.Image{Name: "empty", Platform: lang.Platform{OS: "linux", Architecture: "amd64"}}, nil)
	if empty == h {
		t.Errorf("an empty image hashes like a full one")
	}
}

// TestInputHashFieldChanges changes one field at a time and expects a new
// hash each time.
func TestInputHashFieldChanges(t *testing.T) {
	base := mustHash(t, sampleImage(), samplePins())
	art := func(img *lang.Image, name string) *lang.Artifact {
		for _, a := range img.Artifacts {
			if a.Name == name {
				return a
			}
		}
		panic(name)
	}
	for _, tc := range []struct {
		name   string
		img    func(*lang.Image)
		pins   func(map[string]*lockfiles.Pin)
		pinKey string
	}{
		{name: "platform variant", img: func(i *lang.Image) { i.Platform.Variant = "" }},
		{name: "platform arch", img: func(i *lang.Image) { i.Platform.Architecture = "amd64" }},
		{name: "size", img: func(i *lang.Image) { i.Size++ }},
		{name: "no base", img: func(i *lang.Image) { i.Base = nil }},
		{name: "no kernel", img: func(i *lang.Image) { i.Kernel = nil }},
		{name: "kernel without source", img: func(i *lang.Image) { i.Kernel.Source = nil }},
		{name: "kernel file", img: func(i *lang.Image) { i.Kernel.File = "boot/vmlinuz" }},
		{name: "kernel module added", img: func(i *lang.Image) { i.Kernel.Modules = append(i.Kernel.Modules, "fuse") }},
		{name: "kernel modules reordered", img: func(i *lang.Image) {
			i.Kernel.Modules[0], i.Kernel.Modules[1] = i.Kernel.Modules[1], i.Kernel.Modules[0]
		}},
		{name: "kernel cmdline", img: func(i *lang.Image) { i.Kernel.Cmdline += " quiet" }},
		{name: "artifact mode 0755 to 0750", img: func(i *lang.Image) { art(i, "claude").Mode = 0o750 }},
		{name: "artifact setuid", img: func(i *lang.Image) { art(i, "claude").Mode = 0o4755 }},
		{name: "artifact uid", img: func(i *lang.Image) { art(i, "claude").UID = 0 }},
		{name: "artifact gid", img: func(i *lang.Image) { art(i, "claude").GID = 0 }},
		{name: "artifact dest", img: func(i *lang.Image) { art(i, "claude").Dest = "/usr/bin/claude" }},
		{name: "artifact file", img: func(i *lang.Image) { art(i, "claude").File = "package/cli" }},
		{name: "artifact extract", img: func(i *lang.Image) { art(i, "tree").Extract = false }},
		{name: "artifact keep_special", img: func(i *lang.Image) { art(i, "tree").KeepSpecial = true }},
		{name: "artifact renamed", img: func(i *lang.Image) { art(i, "tree").Name = "atree" }, pins: func(p map[string]*lockfiles.Pin) { p["artifact.atree"] = p["artifact.tree"] }},
		{name: "artifact removed", img: func(i *lang.Image) { i.Artifacts = i.Artifacts[1:] }},
		{name: "file and dest boundary", img: func(i *lang.Image) {
			a := art(i, "claude")
			a.File, a.Dest = a.File+"/usr", strings.TrimPrefix(a.Dest, "/usr")
		}},
		{name: "user uid", img: func(i *lang.Image) { i.Users[0].UID = 600 }},
		{name: "user gid", img: func(i *lang.Image) { i.Users[0].GID = 600 }},
		{name: "user home", img: func(i *lang.Image) { i.Users[0].Home = "/agent" }},
		{name: "user shell", img: func(i *lang.Image) { i.Users[0].Shell = "/bin/bash" }},
		{name: "user name", img: func(i *lang.Image) { i.Users[0].Name = "eval" }},
		{name: "user group added", img: func(i *lang.Image) { i.Users[0].Groups = append(i.Users[0].Groups, "audio") }},
		{name: "user group moved", img: func(i *lang.Image) {
			i.Users[1].Groups = append(i.Users[1].Groups, i.Users[0].Groups[1])
			i.Users[0].Groups = i.Users[0].Groups[:1]
		}},
		{name: "file content", img: func(i *lang.Image) { i.Files[0].Content = "other\n" }},
		{name: "file path", img: func(i *lang.Image) { i.Files[0].Path = "/etc/issue" }},
		{name: "file mode", img: func(i *lang.Image) { i.Files[0].Mode = 0o640 }},
		{name: "file uid", img: func(i *lang.Image) { i.Files[0].UID = 1 }},
		{name: "file gid", img: func(i *lang.Image) { i.Files[0].GID = 1 }},
		{name: "env value", img: func(i *lang.Image) { i.Env["LANG"] = "C" }},
		{name: "env added", img: func(i *lang.Image) { i.Env["TERM"] = "xterm" }},
		{name: "env key and value boundary", img: func(i *lang.Image) {
			delete(i.Env, "LANG")
			i.Env["LANGC"] = ".UTF-8"
		}},
		{name: "base digest", pins: func(p map[string]*lockfiles.Pin) { p["base"].Digest = "sha256:" + strings.Repeat("9", 64) }},
		{name: "base manifest", pins: func(p map[string]*lockfiles.Pin) { p["base"].Manifest = "sha256:" + strings.Repeat("9", 64) }},
		{name: "base kind", pins: func(p map[string]*lockfiles.Pin) { p["base"].Kind = "oci-layout" }},
		{name: "kernel version", pins: func(p map[string]*lockfiles.Pin) { p["kernel"].Version = "6.12.58-1" }},
		{name: "kernel filename", pins: func(p map[string]*lockfiles.Pin) { p["kernel"].Filename = "x.deb" }},
		{name: "npm integrity", pins: func(p map[string]*lockfiles.Pin) {
			p["artifact.claude"].Integrity = "sha512-" + strings.Repeat("B", 86) + "=="
		}},
		{name: "npm sha256", pins: func(p map[string]*lockfiles.Pin) { p["artifact.claude"].SHA256 = strings.Repeat("6", 64) }},
		{name: "url sha256", pins: func(p map[string]*lockfiles.Pin) { p["artifact.moltnet"].SHA256 = strings.Repeat("6", 64) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, pins := sampleImage(), samplePins()
			if tc.img != nil {
				tc.img(img)
			}
			if tc.pins != nil {
				tc.pins(pins)
			}
			if got := mustHash(t, img, pins); got == base {
				t.Errorf("hash unchanged")
			}
		})
	}
}

// TestInputHashCoversEveryField walks lang.Image and lockfiles.Pin by
// reflection, changes each leaf field in turn, and expects the hash to
// change, except for the fields listed as not affecting an image's bytes.
// A field added to either type later fails here until it is hashed or
// listed.
func TestInputHashCoversEveryField(t *testing.T) {
	ignored := map[string]bool{
		"DeclRange": true,
		// A source string is how the content was found; the pin is what it is.
		"Base.Kind": true, "Base.Raw": true, "Base.Ref": true, "Base.Version": true, "Base.SHA256": true, "Base.Range": true,
		"Kernel.Source.Kind": true, "Kernel.Source.Raw": true, "Kernel.Source.Ref": true, "Kernel.Source.Version": true, "Kernel.Source.SHA256": true, "Kernel.Source.Range": true,
		"Kernel.DeclRange":         true,
		"Artifacts[0].Source.Kind": true, "Artifacts[0].Source.Raw": true, "Artifacts[0].Source.Ref": true, "Artifacts[0].Source.Version": true, "Artifacts[0].Source.SHA256": true, "Artifacts[0].Source.Range": true,
		"Artifacts[0].DeclRange": true, "Users[0].DeclRange": true, "Files[0].DeclRange": true,
		"pin.Source": true,
		// Where local sources may be read from, like the source string,
		// is how the content was found.
		"HostPaths": true, "Base.HostPath": true, "Kernel.Source.HostPath": true, "Artifacts[0].Source.HostPath": true,
		// The variables a source's value comes from are for messages.
		"Base.Vars": true, "Kernel.Source.Vars": true, "Artifacts[0].Source.Vars": true,
		// Where packages come from is covered by the digest of the
		// "packages" pin, and the packages themselves by their pins.
		"Packages.Repositories": true, "Packages.Keyring": true, "Packages.Range": true,
	}
	base := mustHash(t, sampleImage(), samplePins())
	seen := map[string]bool{}
	check := func(path string, img *lang.Image, pins map[string]*lockfiles.Pin) {
		seen[path] = true
		got, err := InputHash(img, pins)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return
		}
		if ignored[path] && got != base {
			t.Errorf("changing %s changed the hash; it does not affect the image's bytes", path)
		}
		if !ignored[path] && got == base {
			t.Errorf("changing %s did not change the hash", path)
		}
	}
	for _, path := range leafPaths(reflect.TypeOf(lang.Image{}), "") {
		if strings.HasPrefix(path, "Provision[0].") {
			continue // ProvisionHash's (TestProvisionHash)
		}
		img := sampleImage()
		mutate(reflect.ValueOf(img).Elem(), path)
		pins := samplePins()
		if path == "Packages.Requests" {
			pins[lockfiles.PackagesKey] = &lockfiles.Pin{Source: "git", Kind: lockfiles.KindDebPackages, Digest: "sha256:" + strings.Repeat("1", 64)}
		}
		if path == "Artifacts[0].Name" { // the pin follows the new name
			pins["artifact."+img.Artifacts[0].Name] = pins["artifact.moltnet"]
		}
		check(path, img, pins)
	}
	for _, path := range leafPaths(reflect.TypeOf(lockfiles.Pin{}), "") {
		for key := range samplePins() {
			pins := samplePins()
			v := reflect.ValueOf(pins[key]).Elem().FieldByName(path)
			if v.String() == "" {
				continue // a field this kind does not use
			}
			v.SetString(v.String() + "x")
			check("pin."+path, sampleImage(), pins)
		}
	}
	for path := range ignored {
		if !seen[path] {
			t.Errorf("ignored field %s does not exist", path)
		}
	}
}

// leafPaths lists the paths of t's leaf fields: "Size", "Kernel.File",
// "Artifacts[0].Mode". hcl.Range and lang.Platform count as leaves.
func leafPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		path := prefix + f.Name
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeOf(hcl.Range{}):
			out = append(out, path)
		case ft.Kind() == reflect.Struct:
			out = append(out, leafPaths(ft, path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Pointer:
			out = append(out, leafPaths(ft.Elem().Elem(), path+"[0].")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// mutate changes the leaf field at path inside v.
func mutate(v reflect.Value, path string) {
	head, rest, _ := strings.Cut(path, ".")
	idx := strings.HasSuffix(head, "[0]")
	f := v.FieldByName(strings.TrimSuffix(head, "[0]"))
	if !f.IsValid() {
		panic("no field " + path)
	}
	if idx {
		f = f.Index(0)
	}
	if f.Kind() == reflect.Pointer {
		f = f.Elem()
	}
	if rest != "" && f.Type() != reflect.TypeOf(hcl.Range{}) {
		mutate(f, rest)
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Int, reflect.Int64:
		f.SetInt(f.Int() + 1)
	case reflect.Uint32:
		f.SetUint(f.Uint() ^ 0o1)
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Slice:
		f.Set(reflect.Append(f, reflect.ValueOf("extra")))
	case reflect.Map:
		f.SetMapIndex(reflect.ValueOf("EXTRA"), reflect.ValueOf("1"))
	case reflect.Struct: // hcl.Range
		r := f.Addr().Interface().(*hcl.Range)
		r.Filename += "x"
		r.Start.Line += 7
	default:
		panic(fmt.Sprintf("cannot mutate %s of kind %s", path, f.Kind()))
	}
}

func TestInputHashIgnoresDeclarationOrder(t *testing.T) {
	want := mustHash(t, sampleImage(), samplePins())
	img := sampleImage()
	reverse(img.Artifacts)
	reverse(img.Users)
	reverse(img.Files)
	if got := mustHash(t, img, samplePins()); got != want {
		t.Errorf("reordering artifacts, users and files changed the hash")
	}
	c := Canonical(sampleImage())
	var names []string
	for _, a := range c.Artifacts {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "claude,moltnet,tree" || c.Users[0].Name != "agent" || c.Files[0].Path != "/etc/agent.conf" {
		t.Errorf("Canonical order: artifacts %v, first user %s, first file %s", names, c.Users[0].Name, c.Files[0].Path)
	}
	if sampleImage().Artifacts[0].Name != "moltnet" {
		t.Errorf("Canonical reordered its argument")
	}
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

func TestInputHashIgnoresSourceText(t *testing.T) {
	// Two source strings that resolve to the same content build the same
	// bytes.
	want := mustHash(t, sampleImage(), samplePins())
	img, pins := sampleImage(), samplePins()
	img.Base = src(lang.SourceOCI, "mirror.example.com/library/alpine:3.23", 3)
	pins["base"].Source = img.Base.Raw
	pins["unused"] = &lockfiles.Pin{Source: "x", Kind: "url", SHA256: strings.Repeat("7", 64)}
	if got := mustHash(t, img, pins); got != want {
		t.Errorf("a different source string with the same pin changed the hash")
	}
}

func TestInputHashMissingPin(t *testing.T) {
	for _, key := range []string{"base", "kernel", "artifact.claude"} {
		pins := samplePins()
		delete(pins, key)
		_, err := InputHash(sampleImage(), pins)
		if want := "image.agent: " + key + " is not locked"; err == nil || err.Error() != want {
			t.Errorf("without %s: err = %v, want %q", key, err, want)
		}
	}
	pins := samplePins()
	pins["base"] = nil
	if _, err := InputHash(sampleImage(), pins); err == nil {
		t.Errorf("a nil pin was accepted")
	}
}

func TestInputHashDuplicates(t *testing.T) {
	for name, mutate := range map[string]func(*lang.Image){
		"artifact": func(i *lang.Image) { i.Artifacts[1].Name = i.Artifacts[0].Name },
		"user":     func(i *lang.Image) { i.Users[1].Name = i.Users[0].Name },
		"file":     func(i *lang.Image) { i.Files[1].Path = i.Files[0].Path },
	} {
		img := sampleImage()
		mutate(img)
		if _, err := InputHash(img, samplePins()); err == nil || !strings.Contains(err.Error(), "declared more than once") {
			t.Errorf("duplicate %s: err = %v", name, err)
		}
	}
}
