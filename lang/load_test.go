package lang

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

// writeDir writes files (name -> content) into a new temporary directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustLoad(t *testing.T, dir string, opts Options) *Config {
	t.Helper()
	cfg, diags := Load(dir, opts)
	for _, d := range diags {
		t.Log(d.Error())
	}
	if diags.HasErrors() {
		t.Fatal("Load reported errors")
	}
	return cfg
}

// ignoreRanges compares configurations without their source ranges (which
// the invalid fixtures test) and parsed sources.
var ignoreRanges = cmp.Options{
	cmpopts.IgnoreTypes(hcl.Range{}),
	cmpopts.IgnoreFields(Config{}, "Sources", "Dir"),
}

const fullImages = `
variable "claude_version" {
  default = "2.1.328"
}

image "agent" {
  platform = "linux/arm64/v8"
  base     = "alpine:3.23"
  size     = "4GiB"
  env      = { LANG = "C.UTF-8" }

  kernel {
    source  = "deb:linux-image-amd64=6.12.38-1"
    file    = "boot/vmlinuz-*"
    modules = ["9pnet_fd", "virtio_net"]
    cmdline = "console=ttyS0"
  }

  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@${var.claude_version}"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }
  artifact "moltnet" {
    source = "https://example.com/releases/moltnet_linux_amd64.tar.gz"
    sha256 = "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"
    file   = "moltnet"
    dest   = "/usr/local/bin/moltnet"
    uid    = 0
    gid    = 10
  }
  artifact "busybox" {
    source  = "deb:busybox-static=1:1.36.1-9"
    dest    = "/"
    extract = true
  }
  user "agent" {
    uid    = 501
    groups = ["wheel"]
  }
  user "ci" {
    uid   = 502
    gid   = 100
    home  = "/srv/ci"
    shell = "/bin/ash"
  }
  file "/etc/motd" {
    content = "sandbox\n"
  }
  file "/etc/sbx/id" {
    content = "x"
    mode    = "0600"
    uid     = 501
    gid     = 501
  }
}
`

const fullPolicy = `
egress "llm" {
  allow = ["api.anthropic.com", "*.openai.com"]
  tcp   = ["github.com:22"]
  hosts = { "api.test" = "127.0.0.1:8443" }
}

egress "extra" {
  allow = [
    "api.anthropic.com",
    "chatgpt.com",
  ]
}

secret "claude_oauth" {
  env    = "CLAUDE_CODE_OAUTH_TOKEN"
  hosts  = ["api.anthropic.com"]
  source = "env:CLAUDE_CODE_OAUTH_TOKEN"
}

secret "openai" {
  env    = "OPENAI_API_KEY"
  hosts  = ["chatgpt.com", "api.openai.com", "chatgpt.com"]
  source = "file:~/.codex/key"
}

vfs "workspace" {
  mount "/workspace" {
    host     = "./src/../src/"
    access   = "rw"
    hide     = [".git/config", ".env", "**/*.pem", ".env"]
    readonly = [".git/hooks"]
    tmpfs    = ["node_modules"]
    owner    = "agent"
  }
  mount "/cache" {
    host         = "/var/cache/sbx"
    git_metadata = "writable"
  }
}
`

const fullSandboxes = `
sandbox "eval" {
  image   = image.agent
  vfs     = [vfs.workspace]
  egress  = [egress.llm, egress.extra]
  secrets = [secret.openai, secret.claude_oauth]
  user    = "agent"
  cpus    = 2
  memory  = "2GiB"
  env     = { CI = "1" }
}

sandbox "minimal" {
  image = image.agent
}

output "version" {
  value       = var.claude_version
  description = "The Claude Code version."
}
`

func TestLoadFull(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"images.hcl":    fullImages,
		"policy.hcl":    fullPolicy,
		"sandboxes.hcl": fullSandboxes,
		// Not configuration: the lock file, a var file, a subdirectory,
		// editor files.
		"sbx.lock.hcl":        "this is { not the configuration",
		"prod.vars.hcl":       "claude_version = \"9.9.9\"\n",
		"sub/other.hcl":       "garbage {",
		".#images.hcl":        "garbage {",
		"notes.txt":           "garbage {",
		"src/placeholder.txt": "",
	})
	cfg := mustLoad(t, dir, Options{})

	llm := func(line int) policy.Origin {
		return policy.Origin{Block: "egress.llm", File: "policy.hcl", Line: line}
	}
	want := &Config{
		Files: []string{"images.hcl", "policy.hcl", "sandboxes.hcl"},
		Variables: map[string]*Variable{
			"claude_version": {Name: "claude_version", Value: "2.1.328", Set: "default", Type: "any"},
		},
		Locals: map[string]*Local{},
		Images: map[string]*Image{
			"agent": {
				Name:     "agent",
				Platform: Platform{OS: "linux", Architecture: "arm64", Variant: "v8"},
				Base:     &Source{Kind: SourceOCI, Raw: "alpine:3.23", Ref: "alpine:3.23"},
				Size:     4 << 30,
				Env:      map[string]string{"LANG": "C.UTF-8"},
				Kernel: &Kernel{
					Source:  &Source{Kind: SourceDeb, Raw: "deb:linux-image-amd64=6.12.38-1", Ref: "linux-image-amd64", Version: "6.12.38-1"},
					File:    "boot/vmlinuz-*",
					Modules: []string{"9pnet_fd", "virtio_net"},
					Cmdline: "console=ttyS0",
				},
				Artifacts: []*Artifact{
					{
						Name:   "claude",
						Source: &Source{Kind: SourceNPM, Raw: "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.328", Ref: "@anthropic-ai/claude-code-linux-x64-musl", Version: "2.1.328", Vars: []string{"claude_version"}},
						File:   "package/claude",
						Dest:   "/usr/local/bin/claude",
						Mode:   0o755,
					},
					{
						Name: "moltnet",
						Source: &Source{Kind: SourceURL, Raw: "https://example.com/releases/moltnet_linux_amd64.tar.gz",
							Ref: "https://example.com/releases/moltnet_linux_amd64.tar.gz", SHA256: "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"},
						File: "moltnet",
						Dest: "/usr/local/bin/moltnet",
						GID:  10,
					},
					{
						Name:    "busybox",
						Source:  &Source{Kind: SourceDeb, Raw: "deb:busybox-static=1:1.36.1-9", Ref: "busybox-static", Version: "1:1.36.1-9"},
						Dest:    "/",
						Extract: true,
					},
				},
				Users: []*User{
					{Name: "agent", UID: 501, GID: 501, Home: "/home/agent", Shell: "/bin/sh", Groups: []string{"wheel"}},
					{Name: "ci", UID: 502, GID: 100, Home: "/srv/ci", Shell: "/bin/ash"},
				},
				Files: []*File{
					{Path: "/etc/motd", Content: "sandbox\n", Mode: 0o644},
					{Path: "/etc/sbx/id", Content: "x", Mode: 0o600, UID: 501, GID: 501},
				},
			},
		},
		Egress: map[string]*Egress{
			"llm": {
				Name: "llm",
				Allow: []policy.AllowRule{
					{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: llm(3)},
					{Pattern: policy.MustHostPattern("*.openai.com"), Origin: llm(3)},
				},
				TCP:   []policy.TCPRule{{Dest: policy.HostPort{Host: "github.com", Port: 22}, Origin: llm(4)}},
				Hosts: []policy.HostMapping{{Name: "api.test", Addr: "127.0.0.1:8443", Origin: llm(5)}},
			},
			"extra": {
				Name: "extra",
				Allow: []policy.AllowRule{
					{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: policy.Origin{Block: "egress.extra", File: "policy.hcl", Line: 10}},
					{Pattern: policy.MustHostPattern("chatgpt.com"), Origin: policy.Origin{Block: "egress.extra", File: "policy.hcl", Line: 11}},
				},
			},
		},
		Secrets: map[string]*Secret{
			"claude_oauth": {Name: "claude_oauth", Env: "CLAUDE_CODE_OAUTH_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")}, Source: "env:CLAUDE_CODE_OAUTH_TOKEN"},
			"openai": {Name: "openai", Env: "OPENAI_API_KEY", Source: "file:~/.codex/key",
				Hosts: []policy.HostPattern{policy.MustHostPattern("chatgpt.com"), policy.MustHostPattern("api.openai.com"), policy.MustHostPattern("chatgpt.com")}},
		},
		VFS: map[string]*VFS{
			"workspace": {Name: "workspace", Mounts: []policy.Mount{
				{Guest: "/cache", Host: "/var/cache/sbx", Access: policy.ReadOnly, GitWritable: true, Origin: policy.Origin{Block: "vfs.workspace", File: "policy.hcl", Line: 36}},
				{Guest: "/workspace", Host: "src", Access: policy.ReadWrite,
					Hide: []string{"**/*.pem", ".env", ".git/config"}, ReadOnly: []string{".git/hooks"}, Tmpfs: []string{"node_modules"},
					Owner: "agent", Origin: policy.Origin{Block: "vfs.workspace", File: "policy.hcl", Line: 28}},
			}},
		},
		Sandboxes: map[string]*Sandbox{
			"eval": {
				Name: "eval", Image: "agent", VFS: []string{"workspace"}, Egress: []string{"llm", "extra"}, Secrets: []string{"openai", "claude_oauth"},
				User: "agent", CPUs: 2, Memory: 2 << 30, Env: map[string]string{"CI": "1"},
				Policy: policy.Sandbox{
					Allow: []policy.AllowRule{
						{Pattern: policy.MustHostPattern("*.openai.com"), Origin: llm(3)},
						// Declared by both egress blocks: the first one
						// named by the sandbox is the origin.
						{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: llm(3)},
						{Pattern: policy.MustHostPattern("chatgpt.com"), Origin: policy.Origin{Block: "egress.extra", File: "policy.hcl", Line: 11}},
					},
					TCP:   []policy.TCPRule{{Dest: policy.HostPort{Host: "github.com", Port: 22}, Origin: llm(4)}},
					Hosts: []policy.HostMapping{{Name: "api.test", Addr: "127.0.0.1:8443", Origin: llm(5)}},
					Secrets: []policy.SecretBinding{
						{Name: "claude_oauth", Env: "CLAUDE_CODE_OAUTH_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")},
							Source: "env:CLAUDE_CODE_OAUTH_TOKEN", Origin: policy.Origin{Block: "secret.claude_oauth", File: "policy.hcl", Line: 15}},
						{Name: "openai", Env: "OPENAI_API_KEY", Hosts: []policy.HostPattern{policy.MustHostPattern("api.openai.com"), policy.MustHostPattern("chatgpt.com")},
							Source: "file:~/.codex/key", Origin: policy.Origin{Block: "secret.openai", File: "policy.hcl", Line: 21}},
					},
					Mounts: []policy.Mount{
						{Guest: "/cache", Host: "/var/cache/sbx", Access: policy.ReadOnly, GitWritable: true, Origin: policy.Origin{Block: "vfs.workspace", File: "policy.hcl", Line: 36}},
						{Guest: "/workspace", Host: "src", Access: policy.ReadWrite,
							Hide: []string{"**/*.pem", ".env", ".git/config"}, ReadOnly: []string{".git/hooks"}, Tmpfs: []string{"node_modules"},
							Owner: "agent", Origin: policy.Origin{Block: "vfs.workspace", File: "policy.hcl", Line: 28}},
					},
				},
			},
			"minimal": {Name: "minimal", Image: "agent", User: "root", CPUs: 1, Memory: 1 << 30},
		},
		Outputs: map[string]*Output{
			"version": {Name: "version", Value: "2.1.328", Description: "The Claude Code version."},
		},
	}
	if diff := cmp.Diff(want, cfg, ignoreRanges); diff != "" {
		t.Errorf("Config mismatch (-want +got):\n%s", diff)
	}
	if cfg.Dir != dir {
		t.Errorf("Dir = %q, want %q", cfg.Dir, dir)
	}
	if len(cfg.Sources) != 3 {
		t.Errorf("Sources has %d files, want the 3 configuration files", len(cfg.Sources))
	}
	// Ranges point at the declarations.
	if r := cfg.Sandboxes["eval"].DeclRange; filepath.Base(r.Filename) != "sandboxes.hcl" || r.Start.Line != 2 {
		t.Errorf("sandbox.eval DeclRange = %s, want sandboxes.hcl line 2", r)
	}
	if r := cfg.Images["agent"].Artifacts[0].Source.Range; r.Start.Line != 20 {
		t.Errorf("artifact.claude source range = %s, want line 20", r)
	}
}

func TestVariablePrecedence(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.hcl": `
variable "a" { default = "default" }
variable "b" { default = "default" }
variable "c" { default = "default" }
variable "d" { default = "default" }
variable "e" { default = "default" }
variable "f" {}
`,
		"one.vars.hcl": "c = \"file1\"\nd = \"file1\"\ne = \"file1\"\n",
		"two.json":     `{"d": "file2", "e": "file2"}`,
	})
	cfg := mustLoad(t, dir, Options{
		Environ:  []string{"HOME=/root", "SBX_VAR_b=env", "SBX_VAR_c=env", "SBX_VAR_f=env=with=equals", "SBX_VAR_undeclared=ignored"},
		VarFiles: []string{filepath.Join(dir, "one.vars.hcl"), filepath.Join(dir, "two.json")},
		Vars:     []string{"e=flag1", "e=flag2"},
	})
	want := map[string][2]string{
		"a": {"default", "default"},
		"b": {"env", "env"},
		"c": {"file1", "file:" + filepath.Join(dir, "one.vars.hcl")},
		"d": {"file2", "file:" + filepath.Join(dir, "two.json")},
		"e": {"flag2", "flag"},
		"f": {"env=with=equals", "env"},
	}
	for name, w := range want {
		v := cfg.Variables[name]
		if v == nil {
			t.Errorf("var.%s missing", name)
			continue
		}
		if v.Value != w[0] || v.Set != w[1] {
			t.Errorf("var.%s = %v (set by %s), want %v (set by %s)", name, v.Value, v.Set, w[0], w[1])
		}
	}
	if _, ok := cfg.Sources[filepath.Join(dir, "two.json")]; !ok {
		t.Errorf("Sources lacks the var files: %v", keys(cfg.Sources))
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestVariableTypes(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"main.hcl": `
variable "n" { type = number }
variable "b" { type = bool }
variable "l" { type = list(string) }
variable "m" { type = map(number) }
variable "s" {
  type    = string
  default = 42
}
variable "o" {
  type    = object({ name = string, port = number })
  default = { name = "x", port = "8443" }
}
`,
	})
	cfg := mustLoad(t, dir, Options{
		Environ: []string{"SBX_VAR_b=true"},
		Vars:    []string{"n=2.5", `l=["a", "b"]`, "m={x = 1, y = 2}"},
	})
	want := map[string]any{
		"n": 2.5,
		"b": true,
		"l": []any{"a", "b"},
		"m": map[string]any{"x": int64(1), "y": int64(2)},
		"s": "42",
		"o": map[string]any{"name": "x", "port": int64(8443)},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, cfg.Variables[name].Value); diff != "" {
			t.Errorf("var.%s (-want +got):\n%s", name, diff)
		}
	}
	if got := cfg.Variables["l"].Type; got != "list(string)" {
		t.Errorf("var.l Type = %q", got)
	}
}

func TestLocalsAndFunctions(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"motd.txt": "hello from a file\n",
		"a.hcl": `
variable "version" { default = "2.1.3" }
locals {
  pkg     = "@anthropic-ai/claude-code-linux-x64-musl"
  source  = "npm:${local.pkg}@${var.version}"
  hosts   = concat(local.llm, ["chatgpt.com"])
}
`,
		"b.hcl": `
locals {
  llm       = [for h in ["anthropic", "openai"] : "api.${h}.com"]
  motd      = file("motd.txt")
  motd_sum  = filesha256("./motd.txt")
  text_sum  = sha256("abc")
  b64       = base64encode("hi")
  unb64     = base64decode("aGk=")
  joined    = join(",", sort(["b", "a"]))
  upper     = upper(format("%s-%d", "x", 3))
  json      = jsonencode({ a = 1 })
  length    = length(local.hosts)
  merged    = merge({ a = "1" }, { b = "2" })
  lookup    = lookup({ a = "1" }, "z", "default")
  regex     = regex("^v([0-9]+)", "v12")[0]
  replace   = replace(trimspace("  a-b  "), "-", "_")
  coalesce  = coalesce("", "fallback")
  number    = tonumber("12") + max(1, 5)
  tried     = try(tonumber("x"), "not a number")
  exists    = fileexists("motd.txt")
  missing   = fileexists("nope.txt")
  starts    = startswith("api.example.com", "api.")
}

image "agent" {
  base = "alpine:3.23"
  artifact "claude" {
    source = local.source
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }
  file "/etc/motd" {
    content = local.motd
  }
}
egress "llm" {
  allow = local.hosts
}
`,
	})
	cfg := mustLoad(t, dir, Options{})
	want := map[string]any{
		"pkg":      "@anthropic-ai/claude-code-linux-x64-musl",
		"source":   "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3",
		"hosts":    []any{"api.anthropic.com", "api.openai.com", "chatgpt.com"},
		"llm":      []any{"api.anthropic.com", "api.openai.com"},
		"motd":     "hello from a file\n",
		"motd_sum": "5fb1a5a1ea2b6ad8ad2a1ee28d5a0b50a5eab62e5e0ef43e3b8d86ec8e16c9bb",
		"text_sum": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"b64":      "aGk=",
		"unb64":    "hi",
		"joined":   "a,b",
		"upper":    "X-3",
		"json":     `{"a":1}`,
		"length":   int64(3),
		"merged":   map[string]any{"a": "1", "b": "2"},
		"lookup":   "default",
		"regex":    "12",
		"replace":  "a_b",
		"coalesce": "fallback",
		"number":   int64(17),
		"tried":    "not a number",
		"exists":   true,
		"missing":  false,
		"starts":   true,
	}
	// The file's digest is computed here rather than trusted from above.
	want["motd_sum"] = sha256Hex([]byte("hello from a file\n"))
	for name, w := range want {
		l := cfg.Locals[name]
		if l == nil {
			t.Errorf("local.%s missing", name)
			continue
		}
		if diff := cmp.Diff(w, l.Value); diff != "" {
			t.Errorf("local.%s (-want +got):\n%s", name, diff)
		}
	}
	if got := cfg.Images["agent"].Artifacts[0].Source; got.Ref != "@anthropic-ai/claude-code-linux-x64-musl" || got.Version != "2.1.3" {
		t.Errorf("artifact source = %+v", got)
	}
	if got := cfg.Images["agent"].Files[0].Content; got != "hello from a file\n" {
		t.Errorf("file content = %q", got)
	}
	if got := len(cfg.Egress["llm"].Allow); got != 3 {
		t.Errorf("egress.llm has %d allow rules, want 3", got)
	}
}

// A configuration whose values come from a sensitive variable must not
// repeat that value in any diagnostic.
func TestSensitiveValuesStayOut(t *testing.T) {
	const secretValue = "hunter2-very-secret"
	dir := writeDir(t, map[string]string{
		"main.hcl": `
variable "token" {
  type      = number
  sensitive = true
}
variable "list" {
  type      = list(number)
  sensitive = true
}
secret "api" {
  env    = "API_TOKEN"
  hosts  = ["api.example.com"]
  source = "env:API_TOKEN"
}
`,
	})
	cfg, diags := Load(dir, Options{
		Vars:    []string{"token=" + secretValue, `list=["` + secretValue + `"]`},
		Environ: []string{"API_TOKEN=" + secretValue},
	})
	if !diags.HasErrors() {
		t.Fatal("want type errors for both variables")
	}
	for _, d := range diags {
		if strings.Contains(d.Error(), secretValue) {
			t.Errorf("diagnostic repeats the value: %s", d.Error())
		}
	}
	cfg.Sources = nil
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secretValue) {
		t.Errorf("the configuration holds the environment's secret value: %s", b)
	}
}

func TestLoadDirectoryErrors(t *testing.T) {
	for name, dir := range map[string]string{
		"missing": filepath.Join(t.TempDir(), "nope"),
		"empty":   t.TempDir(),
	} {
		t.Run(name, func(t *testing.T) {
			cfg, diags := Load(dir, Options{})
			if cfg == nil || cfg.Sources == nil {
				t.Fatal("Load must return a Config with Sources")
			}
			if !diags.HasErrors() {
				t.Fatal("want an error")
			}
			if !strings.Contains(diags.Error(), dir) {
				t.Errorf("error %q does not name the directory", diags.Error())
			}
		})
	}
}

// Diagnostic file names follow the directory as the caller wrote it.
func TestDiagnosticFileNames(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": "image \"x\" {\n  base = \"alpine\"\n}\n"})
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cfg, diags := Load(".", Options{})
	if len(diags) != 1 || diags[0].Subject == nil {
		t.Fatalf("want one error with a subject, got %v", diags)
	}
	if got := diags[0].Subject.Filename; got != "main.hcl" {
		t.Errorf("file name %q, want main.hcl", got)
	}
	if cfg.Sources["main.hcl"] == nil {
		t.Errorf("Sources keys %v, want main.hcl", keys(cfg.Sources))
	}
	if cfg.Dir != dir {
		t.Errorf("Dir = %q, want %q (the absolute path); test ran from %s", cfg.Dir, dir, wd)
	}
}

func TestFormat(t *testing.T) {
	in := "image \"a\" {\nbase=\"alpine:3.23\"\n  size =   \"4GiB\"\n}\n"
	want := "image \"a\" {\n  base = \"alpine:3.23\"\n  size = \"4GiB\"\n}\n"
	if got := string(Format([]byte(in))); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

// Some details matter as much as the summary: they name the other half of
// a conflict, or the whole loop.
func TestDiagnosticDetails(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeDir(t, map[string]string{
		"a.hcl": `
image "agent" {
  base = "alpine:3.23"
}
locals {
  a = local.b
  b = local.c
  c = local.a
}
`,
		"b.hcl": `
image "agent" {
  base = "alpine:3.23"
}
image "linked" {
  file "/etc/x" {
    content = file("link.txt")
  }
}
`,
	})
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	_, diags := Load(dir, Options{})
	want := map[string]string{
		"Duplicate image block":  filepath.Join(dir, "a.hcl") + ":2,1",
		"Cycle in local values":  "local.a → local.b → local.c → local.a",
		"Error in function call": "link.txt\" in the configuration directory: it leads outside",
	}
	for summary, detail := range want {
		found := false
		for _, d := range diags {
			if d.Summary == summary {
				found = true
				if !strings.Contains(d.Detail, detail) {
					t.Errorf("%s: detail %q does not mention %q", summary, d.Detail, detail)
				}
			}
		}
		if !found {
			t.Errorf("no %q error; got %s", summary, diags.Error())
		}
	}
	if len(diags) != len(want) {
		t.Errorf("got %d diagnostics, want %d: %s", len(diags), len(want), diags.Error())
	}
}
