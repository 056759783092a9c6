package plan_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/lang"
)

// writeScaleConfig writes a configuration of images images and sandboxes
// sandboxes into dir. Each image has a base, a kernel and two artifacts;
// each sandbox uses one image, one of ten egress blocks, a secret and a
// mount. version changes the Claude Code version of every fifth image,
// extra adds an allowed host to every egress block.
func writeScaleConfig(tb testing.TB, dir string, images, sandboxes int, version string, extra bool) {
	tb.Helper()
	var b strings.Builder
	for i := range images {
		v := "2.1.328"
		if i%5 == 0 {
			v = version
		}
		fmt.Fprintf(&b, `image "img%02d" {
  platform = "linux/amd64"
  base     = "alpine:3.%d"
  kernel {
    source = "deb:linux-image-6.1.0-57-amd64=6.1.192-3"
    file   = "boot/vmlinuz-*"
  }
  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@%s"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }
  artifact "tool" {
    source = "https://downloads.example.com/tool/v1.%d/tool_linux_amd64.tar.gz"
    sha256 = "%064x"
    file   = "tool"
    dest   = "/usr/local/bin/tool"
  }
  user "agent" {
    uid = 501
  }
}

`, i, 20+i%4, v, i, i+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "images.hcl"), []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	b.Reset()
	for e := range 10 {
		hosts := fmt.Sprintf(`"api.anthropic.com", "*.openai.com", "api%d.example.com"`, e)
		if extra {
			hosts += fmt.Sprintf(`, "extra%d.example.com"`, e)
		}
		fmt.Fprintf(&b, "egress \"e%d\" {\n  allow = [%s]\n  tcp   = [\"git%d.example.com:22\"]\n}\n\n", e, hosts, e)
	}
	b.WriteString(`secret "claude_oauth" {
  env    = "CLAUDE_CODE_OAUTH_TOKEN"
  hosts  = ["api.anthropic.com"]
  source = "env:CLAUDE_CODE_OAUTH_TOKEN"
}

vfs "workspace" {
  mount "/workspace" {
    host     = "."
    access   = "rw"
    hide     = [".env", ".env.*", ".git/config", "**/*.pem"]
    readonly = [".git/hooks"]
    tmpfs    = ["node_modules"]
    owner    = "agent"
  }
}

`)
	for s := range sandboxes {
		fmt.Fprintf(&b, `sandbox "sb%03d" {
  image   = image.img%02d
  vfs     = [vfs.workspace]
  egress  = [egress.e%d]
  secrets = [secret.claude_oauth]
  user    = "agent"
  cpus    = %d
  memory  = "2GiB"
}

`, s, s%images, s%10, 1+s%4)
	}
	if err := os.WriteFile(filepath.Join(dir, "sandboxes.hcl"), []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkPlan200x50 plans a configuration of 50 images and 200
// sandboxes against the state of a previous revision (a tenth of the
// images bumped, one host added to every egress block): loading, locking
// with stable pins, Desired, Compute and rendering.
func BenchmarkPlan200x50(b *testing.B) {
	beforeDir, afterDir := b.TempDir(), b.TempDir()
	writeScaleConfig(b, beforeDir, 50, 200, "2.1.328", false)
	writeScaleConfig(b, afterDir, 50, 200, "2.1.332", true)
	beforeCfg, beforeLock := loadWithPins(b, beforeDir)
	prior, diags := plan.Desired(beforeCfg, beforeLock)
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cfg, diags := lang.Load(afterDir, lang.Options{})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		lock, err := pinAll(cfg)
		if err != nil {
			b.Fatal(err)
		}
		desired, diags := plan.Desired(cfg, lock)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		p := plan.Compute(desired, prior)
		if s := p.Summary(); s.Replace != 10+40 || s.Change != 160 {
			b.Fatalf("unexpected plan summary %+v", s)
		}
		if err := plan.Render(io.Discard, p, plan.RenderOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompute200x50 is BenchmarkPlan200x50 without loading and
// locking: Desired, Compute and Render only.
func BenchmarkCompute200x50(b *testing.B) {
	beforeDir, afterDir := b.TempDir(), b.TempDir()
	writeScaleConfig(b, beforeDir, 50, 200, "2.1.328", false)
	writeScaleConfig(b, afterDir, 50, 200, "2.1.332", true)
	beforeCfg, beforeLock := loadWithPins(b, beforeDir)
	prior, diags := plan.Desired(beforeCfg, beforeLock)
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	cfg, lock := loadWithPins(b, afterDir)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		desired, diags := plan.Desired(cfg, lock)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		p := plan.Compute(desired, prior)
		if err := plan.Render(io.Discard, p, plan.RenderOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
