//go:build linux

package vfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/egress"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// agreeSpec is the spec FuzzLangAgreesWithEnforcement loads; each pattern
// sits alone on its line, so an error is attributed by its line.
const agreeSpec = `image "agent" {
  base = "alpine:3.23"
}

vfs "w" {
  mount "/w" {
    host     = "w"
    access   = "rw"
    hide     = [%s]
    readonly = [%s]
    tmpfs    = [%s]
  }
}

egress "e" {
  allow = ["api.test"]
  request "api.test" {
    paths    = [%s]
    git_push = [%s]
  }
}

sandbox "s" {
  image  = image.agent
  vfs    = [vfs.w]
  egress = [egress.e]
}
`

// The lines of agreeSpec that hold each pattern.
var agreeLines = map[string]int{"hide": 9, "readonly": 10, "tmpfs": 11, "paths": 18, "git_push": 19}

// hclString writes s as an HCL quoted string holding exactly s.
func hclString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		case (r == '{') && i > 0 && (s[i-1] == '$' || s[i-1] == '%'):
			// "${" and "%{" open templates; "$${" and "%%{" are literal.
			b.WriteByte(s[i-1])
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// probes are the mount paths, besides those made from the patterns,
// whose fate plan and server must agree on.
var probes = []string{
	".env", "a/.env", "secrets/key", "secrets", "docs/a.md", "docs/tmp/x", "node_modules/p/index.js",
	"build/out/a.o", "build/cache/x", "docs/tmp/.env", "x/y/z.pem", "src/main.go", "vendor/m/go.mod", "a/b/c/d",
}

// probesOf makes paths a pattern names: wildcards replaced by a letter,
// "**" by none and by two names.
func probesOf(p string) []string {
	p = strings.Trim(p, "/")
	var out []string
	for _, dd := range []string{"", "q/r"} {
		s := strings.ReplaceAll(p, "**", dd)
		s = strings.NewReplacer("*", "x", "?", "q", "\\", "").Replace(s)
		if i := strings.IndexByte(s, '['); i >= 0 {
			if j := strings.IndexByte(s[i:], ']'); j > 1 {
				s = s[:i] + s[i+1:i+2] + s[i+j+1:]
			}
		}
		var names []string
		for _, n := range strings.Split(s, "/") {
			if n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "[]\x00") {
				names = append(names, n)
			}
		}
		if len(names) > 0 && len(names) < 8 {
			out = append(out, strings.Join(names, "/"))
		}
	}
	return out
}

// FuzzLangAgreesWithEnforcement: for each pattern kind, lang's validation
// of a spec accepts the pattern exactly when the enforcer that will use
// it compiles it (the file server's CompileRules for hide, readonly and
// tmpfs; the egress engine's Compile for paths and git_push). For
// accepted mount patterns, the host paths plan says are hidden are those
// the server hides, among the paths it shows the guest from the host.
func FuzzLangAgreesWithEnforcement(f *testing.F) {
	for _, c := range [][5]string{
		{".env", "docs", "node_modules", "/v1/**", "refs/heads/agent/*"},
		{"./secrets", "a//b", "cache//", "/a//b", "refs/heads/a..b"},
		{"secrets/", "docs/tmp", "docs", "/a/*/b/", "refs/**"},
		{"a[/]b", "[a", "!x", "/a%2Fb", "refs/heads"},
		{"**/*.pem", "build/**", "build/cache", "/x;y", "refs/heads/[ab]"},
		{"/etc", "../x", "", "v1", "heads/main"},
		{`a\*b`, "x/..", "**", "/**", "refs/heads/x.lock"},
		{"a\tb", "${x}", "%{y}", "/caf\u00e9", "refs/tags/v*"},
		{"id_*", "vendor", "docs/tmp", "/a/**b", "refs/heads/**x"},
		{".env", "docs", "docs/tmp", "/v1/", "refs/heads/x"},
	} {
		f.Add(c[0], c[1], c[2], c[3], c[4])
	}
	f.Fuzz(func(t *testing.T, hide, readonly, tmpfs, path, ref string) {
		for _, s := range []string{hide, readonly, tmpfs, path, ref} {
			if !utf8.ValidString(s) || len(s) > 200 {
				t.Skip("an HCL file is UTF-8; long patterns add nothing")
			}
		}
		dir := t.TempDir()
		src := fmt.Sprintf(agreeSpec, hclString(hide), hclString(readonly), hclString(tmpfs), hclString(path), hclString(ref))
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "w"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg, diags := lang.Load(dir, lang.Options{})
		refused := map[string]bool{}
		for _, d := range diags {
			if d.Severity != hcl.DiagError {
				continue
			}
			kind := ""
			if d.Subject != nil {
				for k, line := range agreeLines {
					if d.Subject.Start.Line == line {
						kind = k
					}
				}
			}
			if kind == "" {
				t.Fatalf("lang refused something besides a pattern:\n%s\n%s", src, d.Error())
			}
			refused[kind] = true
		}

		mount := func(kind, p string) policy.Mount {
			m := policy.Mount{Guest: "/w", Access: policy.ReadWrite}
			switch kind {
			case "hide":
				m.Hide = []string{p}
			case "readonly":
				m.ReadOnly = []string{p}
			case "tmpfs":
				m.Tmpfs = []string{p}
			}
			return m
		}
		rule := func(kind, p string) policy.AllowRule {
			r := policy.AllowRule{Pattern: policy.MustHostPattern("api.test")}
			if kind == "paths" {
				r.Paths = []string{p}
			} else {
				r.GitPush = []string{p}
			}
			return r
		}
		for kind, p := range map[string]string{"hide": hide, "readonly": readonly, "tmpfs": tmpfs} {
			_, err := CompileRules(mount(kind, p))
			if (err == nil) == refused[kind] {
				t.Errorf("%s %q: lang refused: %v; the file server's CompileRules: %v", kind, p, refused[kind], err)
			}
		}
		for kind, p := range map[string]string{"paths": path, "git_push": ref} {
			_, err := egress.Compile(policy.Sandbox{Allow: []policy.AllowRule{rule(kind, p)}}, nil, nil)
			if (err == nil) == refused[kind] {
				t.Errorf("%s %q: lang refused: %v; the egress engine's Compile: %v", kind, p, refused[kind], err)
			}
		}
		if len(refused) > 0 || t.Failed() {
			return
		}

		// Everything validated: the spec's own policy compiles in both
		// enforcers, and plan and server agree on the probe paths.
		sb := cfg.Sandboxes["s"]
		if sb == nil || len(sb.Policy.Mounts) != 1 {
			t.Fatalf("the sandbox's policy: %+v", sb)
		}
		if _, err := egress.Compile(sb.Policy, nil, nil); err != nil {
			t.Fatalf("egress.Compile of the validated policy: %v", err)
		}
		m := sb.Policy.Mounts[0]
		rules, err := CompileRules(m)
		if err != nil {
			t.Fatalf("CompileRules of the validated mount: %v", err)
		}
		paths := slices.Clone(probes)
		for _, p := range []string{hide, readonly, tmpfs} {
			paths = append(paths, probesOf(p)...)
		}
		host := filepath.Join(dir, "w")
		for _, p := range paths {
			if err := os.MkdirAll(filepath.Join(host, filepath.FromSlash(p)), 0o755); err != nil {
				t.Skipf("cannot make probe %q: %v", p, err)
			}
		}
		// Every directory on the way to a probe is a path too.
		seen := map[string]bool{}
		for _, p := range paths {
			names := strings.Split(p, "/")
			for n := 1; n <= len(names); n++ {
				seen[strings.Join(names[:n], "/")] = true
			}
		}
		// The server shows the guest a host path when neither it nor an
		// ancestor is hidden or in memory; the plan lists a hidden path
		// whose ancestors the guest sees from the host.
		want := map[string]bool{}
		for rel := range seen {
			if !rules.place(rel).hidden {
				continue
			}
			names := strings.Split(rel, "/")
			shown := true
			for n := 1; n < len(names); n++ {
				a := rules.place(strings.Join(names[:n], "/"))
				shown = shown && !a.hidden && !a.inMem
			}
			if shown {
				want[termtext.Line(rel)+"/"] = true
			}
		}
		reports := plan.InspectMounts(context.Background(), cfg, plan.InspectOptions{MaxShown: 1 << 20})
		if len(reports) != 1 || reports[0].Problem != "" {
			t.Fatalf("InspectMounts: %+v", reports)
		}
		got := map[string]bool{}
		for _, h := range reports[0].Hide {
			for _, p := range h.Paths {
				got[p] = true
			}
		}
		for p := range want {
			if !got[p] {
				t.Errorf("hide %q readonly %q tmpfs %q: the server hides %s, the plan does not list it", hide, readonly, tmpfs, p)
			}
		}
		for p := range got {
			if !want[p] {
				t.Errorf("hide %q readonly %q tmpfs %q: the plan lists %s as hidden, the server does not hide it there", hide, readonly, tmpfs, p)
			}
		}
	})
}
