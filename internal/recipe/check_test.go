package recipe

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// lockFor returns the lock entry `sbx lock` would write for sampleImage.
func lockFor(t *testing.T) *lockfiles.Image {
	t.Helper()
	img := sampleImage()
	pins := samplePins()
	return &lockfiles.Image{
		Name:      img.Name,
		Platform:  img.Platform.String(),
		InputHash: mustHash(t, img, pins),
		Inputs:    pins,
	}
}

func TestCheckImageLocked(t *testing.T) {
	if err := CheckImageLocked(sampleImage(), lockFor(t)); err != nil {
		t.Fatalf("an up-to-date lock was refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		img  func(*lang.Image)
		lock func(*lockfiles.Image)
		want []string // every one must appear in the error
	}{
		{
			name: "not locked",
			lock: nil,
			want: []string{"image.agent is not locked", "sbx lock"},
		},
		{
			name: "source changed",
			img:  func(i *lang.Image) { i.Artifacts[1].Source.Raw = "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.4" },
			want: []string{"image.agent: artifact.claude", `"npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3"`, `"npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.4"`, "run `sbx lock`"},
		},
		{
			name: "kind changed",
			img:  func(i *lang.Image) { i.Base.Kind = lang.SourceOCILayout },
			want: []string{"image.agent: base", `"oci"`, `"oci-layout"`, "sbx lock"},
		},
		{
			name: "declared sha256 changed",
			img:  func(i *lang.Image) { i.Artifacts[0].Source.SHA256 = strings.Repeat("0", 64) },
			want: []string{"image.agent: artifact.moltnet", strings.Repeat("0", 64), strings.Repeat("d4", 32)},
		},
		{
			name: "input missing from lock",
			lock: func(l *lockfiles.Image) { delete(l.Inputs, "kernel") },
			want: []string{"image.agent: kernel is not locked; run `sbx lock`"},
		},
		{
			name: "input no longer declared",
			img:  func(i *lang.Image) { i.Artifacts = i.Artifacts[:2] },
			want: []string{"image.agent: the lock pins artifact.tree", `"file:./tree.tar"`, "no longer declares"},
		},
		{
			name: "platform changed",
			img:  func(i *lang.Image) { i.Platform = lang.Platform{OS: "linux", Architecture: "amd64"} },
			want: []string{`"linux/arm64/v8"`, `"linux/amd64"`},
		},
		{
			name: "mode changed without relocking",
			img:  func(i *lang.Image) { i.Artifacts[1].Mode = 0o750 },
			want: []string{"image.agent: the lock's input hash", "sbx lock"},
		},
		{
			name: "two problems",
			lock: func(l *lockfiles.Image) {
				delete(l.Inputs, "base")
				l.Inputs["artifact.claude"].Source = "npm:x@1"
			},
			want: []string{"base is not locked", `"npm:x@1"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := sampleImage()
			if tc.img != nil {
				tc.img(img)
			}
			var l *lockfiles.Image
			if tc.name != "not locked" {
				l = lockFor(t)
				if tc.lock != nil {
					tc.lock(l)
				}
			}
			err := CheckImageLocked(img, l)
			if err == nil {
				t.Fatal("CheckImageLocked accepted an out-of-date lock")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckLocked(t *testing.T) {
	img := sampleImage()
	other := &lang.Image{Name: "bare", Platform: lang.Platform{OS: "linux", Architecture: "amd64"}, DeclRange: hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 40}}}
	cfg := &lang.Config{Images: map[string]*lang.Image{"agent": img, "bare": other}}
	l := &lockfiles.Lock{Images: map[string]*lockfiles.Image{"agent": lockFor(t)}}

	// bare is not locked: one diagnostic at its block.
	diags := CheckLocked(cfg, l)
	if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Start.Line != 40 || !strings.Contains(diags[0].Detail, "image.bare is not locked") {
		t.Fatalf("diags = %v", diags)
	}

	l.Images["bare"] = &lockfiles.Image{Name: "bare", Platform: "linux/amd64", InputHash: mustHash(t, other, nil)}
	if diags := CheckLocked(cfg, l); diags.HasErrors() {
		t.Fatalf("an up-to-date lock was refused: %s", diags.Error())
	}

	// A changed source points at the source's range; a stale image has
	// no range.
	img.Artifacts[1].Source.Raw += "-next"
	l.Images["gone"] = &lockfiles.Image{Name: "gone", Platform: "linux/amd64"}
	diags = CheckLocked(cfg, l)
	if len(diags) != 2 {
		t.Fatalf("want 2 diagnostics, got %v", diags)
	}
	if s := diags[0].Subject; s == nil || s.Start.Line != 10 || !strings.Contains(diags[0].Detail, "artifact.claude") {
		t.Errorf("first diagnostic %v, want one at main.hcl:10 about artifact.claude", diags[0])
	}
	if diags[1].Subject != nil || !strings.Contains(diags[1].Detail, "image.gone") {
		t.Errorf("second diagnostic %v, want image.gone without a range", diags[1])
	}

	if diags := CheckLocked(&lang.Config{}, nil); diags.HasErrors() {
		t.Errorf("an empty configuration needs no lock: %s", diags.Error())
	}
	if diags := CheckLocked(cfg, nil); len(diags) != 2 {
		t.Errorf("no lock at all: want one diagnostic per image, got %v", diags)
	}
}
