package lang

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

// testCAPEM makes a self-signed CA certificate in PEM, as a company's
// root would be.
func testCAPEM(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

const egressImage = `image "agent" {
  base = "alpine:3.23"
}
`

// TestEgressRequestRules decodes passthrough, request blocks and ca, and
// checks the sandbox policy they give, origins included.
func TestEgressRequestRules(t *testing.T) {
	ca1, ca2 := testCAPEM(t, "corp root"), testCAPEM(t, "test root")
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "git" {
  allow       = ["github.com", "api.anthropic.com", "pinned.example.com"]
  passthrough = ["pinned.example.com", "*.pinned.test"]
  ca          = ["./certs//corp.pem", "certs/corp.pem"]

  request "github.com" {
    methods  = ["POST", "GET", "GET"]
    paths    = ["/org/repo.git/**"]
    git_push = ["refs/heads/agent/*"]
  }
}

egress "llm" {
  allow = ["api.anthropic.com"]
  ca    = ["test.pem"]
  request "api.anthropic.com" {
    paths = ["/v1/**"]
  }
}

sandbox "eval" {
  image  = image.agent
  egress = [egress.git, egress.llm]
}
`,
		"certs/corp.pem": "Corporate root, installed 2026\n" + ca1,
		"test.pem":       ca2 + "\n# trailing notes\n",
	})
	cfg := mustLoad(t, dir, Options{})
	o := func(block string, line int) policy.Origin {
		return policy.Origin{Block: block, File: "main.hcl", Line: line}
	}
	want := policy.Sandbox{
		Allow: []policy.AllowRule{
			{Pattern: policy.MustHostPattern("*.pinned.test"), Passthrough: true, Origin: o("egress.git", 3)},
			// egress.git allows it unrestricted, which beats egress.llm's
			// paths: the allow entry stays the origin.
			{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: o("egress.git", 2)},
			{Pattern: policy.MustHostPattern("github.com"), Methods: []string{"GET", "POST"}, Paths: []string{"/org/repo.git/**"},
				GitPush: []string{"refs/heads/agent/*"}, Origin: o("egress.git", 6)},
			{Pattern: policy.MustHostPattern("pinned.example.com"), Passthrough: true, Origin: o("egress.git", 3)},
		},
		CAs: []policy.CA{
			{Path: "certs/corp.pem", PEM: ca1, Origin: o("egress.git", 4)},
			{Path: "test.pem", PEM: ca2, Origin: o("egress.llm", 15)},
		},
	}
	if diff := cmp.Diff(want, cfg.Sandboxes["eval"].Policy); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
}

// TestEgressUnion checks the union rule across egress blocks: for one
// pattern the least restricted rule wins, two restricted rules unite their
// lists, passthrough wins over inspection; and the warning when the union
// lets through what neither block does.
func TestEgressUnion(t *testing.T) {
	for _, c := range []struct {
		name     string
		a, b     string // bodies of egress "a" and "b"
		want     policy.AllowRule
		wantWarn bool
	}{
		{
			name: "same restriction twice",
			a:    `request "x.test" { methods = ["GET"] }`,
			b:    `request "x.test" { methods = ["GET"] }`,
			want: policy.AllowRule{Methods: []string{"GET"}},
		},
		{
			name: "methods united",
			a:    `request "x.test" { methods = ["GET"] }`,
			b:    `request "x.test" { methods = ["POST", "GET"] }`,
			want: policy.AllowRule{Methods: []string{"GET", "POST"}},
		},
		{
			name: "unrestricted beats restricted",
			a:    `request "x.test" { methods = ["GET"] }`,
			b:    ``,
			want: policy.AllowRule{},
		},
		{
			name: "one within the other",
			a:    "request \"x.test\" {\n methods = [\"GET\"]\n paths = [\"/a\"]\n }",
			b:    `request "x.test" { methods = ["GET", "HEAD"] }`,
			want: policy.AllowRule{Methods: []string{"GET", "HEAD"}},
		},
		{
			name:     "different respects: wider than either",
			a:        "request \"x.test\" {\n methods = [\"GET\"]\n paths = [\"/a/**\"]\n }",
			b:        "request \"x.test\" {\n methods = [\"POST\"]\n paths = [\"/b/**\"]\n }",
			want:     policy.AllowRule{Methods: []string{"GET", "POST"}, Paths: []string{"/a/**", "/b/**"}},
			wantWarn: true,
		},
		{
			name:     "passthrough drops the other's request rules",
			a:        `request "x.test" { git_push = ["refs/heads/agent/*"] }`,
			b:        `passthrough = ["x.test"]`,
			want:     policy.AllowRule{Passthrough: true},
			wantWarn: true,
		},
		{
			name: "passthrough and plain allow",
			a:    ``,
			b:    `passthrough = ["x.test"]`,
			want: policy.AllowRule{Passthrough: true},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{
				"image.hcl": egressImage,
				"main.hcl": "egress \"a\" {\n  allow = [\"x.test\"]\n  " + c.a + "\n}\n" +
					"egress \"b\" {\n  allow = [\"x.test\"]\n  " + c.b + "\n}\n" +
					"sandbox \"s\" {\n  image  = image.agent\n  egress = [egress.a, egress.b]\n}\n",
			})
			cfg, diags := Load(dir, Options{})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			got := cfg.Sandboxes["s"].Policy.Allow
			if len(got) != 1 {
				t.Fatalf("allow = %+v, want one rule", got)
			}
			c.want.Pattern = policy.MustHostPattern("x.test")
			if diff := cmp.Diff(c.want, got[0], cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Origin" }, cmp.Ignore())); diff != "" {
				t.Errorf("merged rule (-want +got):\n%s", diff)
			}
			var warns hcl.Diagnostics
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning {
					warns = append(warns, d)
				}
			}
			if c.wantWarn != (len(warns) == 1) || len(warns) > 1 {
				t.Errorf("warnings = %v, want a warning: %v", warns, c.wantWarn)
			}
			// The sandbox's egress list is on the file's third line from
			// the end.
			wantLine := strings.Count(c.a+c.b, "\n") + 11
			for _, w := range warns {
				if w.Subject == nil || w.Subject.Start.Line != wantLine || !strings.Contains(w.Detail, "egress.a and egress.b") {
					t.Errorf("warning %q at %v, want it at the reference to egress.b (line %d) naming both blocks", w.Detail, w.Subject, wantLine)
				}
			}
		})
	}
}

// TestEgressCAConfined plays an untrusted checkout whose ca names files
// outside the configuration directory: through "..", an absolute path, a
// symbolic link leading out (to a directory or a file), and a link to
// /proc. Each is refused with an error at the ca entry's line, and no
// byte of what lies outside reaches the diagnostics or the policy.
func TestEgressCAConfined(t *testing.T) {
	outsidePEM := testCAPEM(t, "outside")
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "root.pem")
	if err := os.WriteFile(outside, []byte(outsidePEM), 0o644); err != nil {
		t.Fatal(err)
	}
	body := strings.Split(strings.TrimSpace(outsidePEM), "\n")[1] // a line of the certificate's base64
	for _, c := range []struct {
		name, path string
		setup      func(t *testing.T, dir string)
		want       string
	}{
		{"dot-dot", "../" + filepath.Base(outsideDir) + "/root.pem", nil, "leads outside the configuration directory"},
		{"absolute", outside, nil, "is absolute"},
		{"link to a file outside", "certs/root.pem", func(t *testing.T, dir string) {
			mustSymlink(t, outside, filepath.Join(dir, "certs", "root.pem"))
		}, "outside the configuration directory"},
		{"link to a directory outside", "up/root.pem", func(t *testing.T, dir string) {
			mustSymlink(t, outsideDir, filepath.Join(dir, "up"))
		}, "outside the configuration directory"},
		{"link through a relative path", "certs/rel.pem", func(t *testing.T, dir string) {
			rel, err := filepath.Rel(filepath.Join(dir, "certs"), outside)
			if err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, rel, filepath.Join(dir, "certs", "rel.pem"))
		}, "outside the configuration directory"},
		{"link to proc", "certs/env.pem", func(t *testing.T, dir string) {
			mustSymlink(t, "/proc/self/environ", filepath.Join(dir, "certs", "env.pem"))
		}, "outside the configuration directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(filepath.Dir(outsideDir), "cfg-"+strings.ReplaceAll(c.name, " ", "-"))
			if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			spec := egressImage + "egress \"corp\" {\n  allow = [\"api.example.com\"]\n  ca    = [\"" + c.path + "\"]\n}\n" +
				"sandbox \"s\" {\n  image  = image.agent\n  egress = [egress.corp]\n}\n"
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				c.setup(t, dir)
			}
			cfg, diags := Load(dir, Options{})
			var found bool
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Summary == "Cannot read CA file" && d.Subject != nil &&
					d.Subject.Start.Line == 6 && strings.Contains(d.Detail, c.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("no \"Cannot read CA file\" error at main.hcl:6 saying %q; got %v", c.want, diags)
			}
			if out := render(t, cfg, diags); strings.Contains(out, body) {
				t.Errorf("the diagnostics quote the file outside:\n%s", out)
			}
			if e := cfg.Egress["corp"]; e != nil && len(e.CAs) > 0 {
				t.Errorf("the CA outside was read: %+v", e.CAs)
			}
		})
	}
}

// A link that stays inside the configuration directory is followed, and
// the CA keeps the path as written.
func TestEgressCALinkInside(t *testing.T) {
	pemText := testCAPEM(t, "inside")
	dir := writeDir(t, map[string]string{
		"image.hcl":         egressImage,
		"shared/root.crt":   pemText,
		"main.hcl":          "egress \"corp\" {\n  allow = [\"api.example.com\"]\n  ca    = [\"certs/root.pem\"]\n}\n",
		"certs/placeholder": "",
	})
	mustSymlink(t, "../shared/root.crt", filepath.Join(dir, "certs", "root.pem"))
	cfg := mustLoad(t, dir, Options{})
	cas := cfg.Egress["corp"].CAs
	if len(cas) != 1 || cas[0].Path != "certs/root.pem" || cas[0].PEM != pemText {
		t.Errorf("CAs = %+v, want certs/root.pem with the linked certificate", cas)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestEgressShadowWarnings: a passthrough or request rule that a broader
// pattern of the same sandbox makes moot is warned about, since the
// engine lets a request through when any matching rule admits it and
// splices a connection only when every matching rule is passthrough.
func TestEgressShadowWarnings(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "wide" {
  allow = ["*.example.com", "*.pinned.test"]
}
egress "narrow" {
  allow       = ["api.example.com", "x.pinned.test"]
  passthrough = ["pinned.example.com", "y.pinned.test"]
  request "api.example.com" {
    methods = ["GET"]
  }
}
egress "fine" {
  allow       = ["api.other.test"]
  passthrough = ["*.pinned.other.test", "*.other.example"]
  request "api.other.test" {
    methods = ["GET"]
  }
}
sandbox "s" {
  image  = image.agent
  egress = [egress.wide, egress.narrow]
}
sandbox "t" {
  image  = image.agent
  egress = [egress.narrow, egress.fine]
}
`,
	})
	_, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Subject != nil {
			got = append(got, fmt.Sprintf("%d: %s: %s", d.Subject.Start.Line, d.Summary, d.Detail))
		}
	}
	want := []string{
		`20: Request rules have no effect: In sandbox.s, egress.narrow (main.hcl:7) narrows the requests to api.example.com, but *.example.com (main.hcl:2) allows every request to it`,
		`20: Passthrough has no effect: In sandbox.s, egress.narrow makes pinned.example.com passthrough, but *.example.com (main.hcl:2) also allows it and is inspected`,
		`20: Passthrough has no effect: In sandbox.s, egress.narrow makes y.pinned.test passthrough, but *.pinned.test (main.hcl:2) also allows it and is inspected`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d:\n got %s\nwant %s…", i, got[i], want[i])
		}
	}
}

// TestEgressUnusedHostsWarned: a hosts mapping of a name that no allow,
// passthrough or tcp rule of the sandbox reaches is warned about (it does
// nothing), per sandbox: the same block's mapping is used in a sandbox
// whose other block allows the name. It stays in the policy, which
// marks it unused.
func TestEgressUnusedHostsWarned(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "fixtures" {
  allow = ["api.test"]
  tcp   = ["git.test:22"]
  hosts = {
    "api.test"    = "127.0.0.1:8443"
    "git.test"    = "127.0.0.1:2222"
    "ollama.test" = "127.0.0.1:11434"
  }
}
egress "ollama" {
  passthrough = ["ollama.test"]
}
sandbox "s" {
  image  = image.agent
  egress = [egress.fixtures]
}
sandbox "t" {
  image  = image.agent
  egress = [egress.fixtures, egress.ollama]
}
`,
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Subject != nil {
			got = append(got, fmt.Sprintf("%d: %s: %s", d.Subject.Start.Line, d.Summary, d.Detail))
		}
	}
	want := `15: Unused host mapping: In sandbox.s, egress.fixtures (main.hcl:7) maps ollama.test to 127.0.0.1:11434, but no allow, passthrough or tcp rule of egress.fixtures lets the guest reach ollama.test, so the mapping is unused`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("warnings:\n%s\nwant one:\n%s…", strings.Join(got, "\n"), want)
	}
	if used := cfg.Sandboxes["s"].Policy.UsedHosts(); len(used) != 2 || len(cfg.Sandboxes["s"].Policy.Hosts) != 3 {
		t.Errorf("sandbox.s uses the mappings %+v", used)
	}
}

// TestEgressCAWithKeyRefused: a CA file that also holds a private key is
// refused, naming the block type, and neither the key nor the
// certificate beside it reaches the policy or the diagnostics.
func TestEgressCAWithKeyRefused(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	dir := writeDir(t, map[string]string{
		"image.hcl":      egressImage,
		"main.hcl":       "egress \"corp\" {\n  allow = [\"api.example.com\"]\n  ca    = [\"certs/root.pem\"]\n}\n",
		"certs/root.pem": testCAPEM(t, "root") + keyPEM,
	})
	cfg, diags := Load(dir, Options{})
	if len(diags) != 1 || diags[0].Summary != "Invalid CA file" || diags[0].Subject.Start.Line != 3 ||
		!strings.Contains(diags[0].Detail, `"EC PRIVATE KEY"`) {
		t.Fatalf("diagnostics %v, want one \"Invalid CA file\" at line 3 naming the key's block type", diags)
	}
	keyLine := strings.Split(keyPEM, "\n")[1]
	if out := render(t, cfg, diags); strings.Contains(out, keyLine) {
		t.Errorf("the diagnostics quote the key:\n%s", out)
	}
	if cas := cfg.Egress["corp"].CAs; len(cas) != 0 {
		t.Errorf("CAs = %+v, want none", cas)
	}
}

// TestSecretPlaces checks that a secret's headers and plain_http entries
// reach its binding canonical: lower case, sorted, without repeats.
func TestSecretPlaces(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "e" {
  allow = ["api.test", "local.test"]
}
secret "key" {
  env        = "KEY"
  hosts      = ["api.test", "local.test"]
  source     = "env:KEY"
  headers    = ["X-Api-Key", "x-goog-api-key", "x-api-key"]
  plain_http = ["local.test:80", "LOCAL.test:80"]
}
sandbox "s" {
  image   = image.agent
  egress  = [egress.e]
  secrets = [secret.key]
}
`,
	})
	cfg := mustLoad(t, dir, Options{})
	got := cfg.Sandboxes["s"].Policy.Secrets
	if len(got) != 1 {
		t.Fatalf("secrets = %+v", got)
	}
	if want := []string{"x-api-key", "x-goog-api-key"}; !slices.Equal(got[0].Headers, want) {
		t.Errorf("headers = %q, want %q", got[0].Headers, want)
	}
	if want := []policy.HostPort{{Host: "local.test", Port: 80}}; !slices.Equal(got[0].PlainHTTP, want) {
		t.Errorf("plain_http = %v, want %v", got[0].PlainHTTP, want)
	}
}

// TestSecretSources: a secret may leave its source to the user's
// bindings file; one whose spec names a command loads with a warning at
// the source, since that command is never run.
func TestSecretSources(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "e" {
  allow = ["api.test"]
}
secret "bound" {
  env   = "BOUND"
  hosts = ["api.test"]
}
secret "cmd" {
  env    = "CMD"
  hosts  = ["api.test"]
  source = "command:gh auth token"
}
sandbox "s" {
  image   = image.agent
  egress  = [egress.e]
  secrets = [secret.bound, secret.cmd]
}
`,
	})
	cfg, diags := Load(dir, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Subject != nil {
			got = append(got, fmt.Sprintf("%d: %s", d.Subject.Start.Line, d.Summary))
		}
	}
	if len(got) != 1 || got[0] != "11: Command source is not run" {
		t.Errorf("warnings %q, want one at line 11", got)
	}
	if !strings.Contains(diags[0].Detail, "bindings.hcl") || !strings.Contains(diags[0].Detail, `binding "cmd"`) {
		t.Errorf("the warning does not say where to bind it: %s", diags[0].Detail)
	}
	if s := cfg.Secrets["bound"]; s.Source != "" {
		t.Errorf("secret.bound has source %q, want none", s.Source)
	}
	if s := cfg.Secrets["cmd"]; s.Source != "command:gh auth token" {
		t.Errorf("secret.cmd has source %q: the spec's text is kept, for plans to compare", s.Source)
	}
}
