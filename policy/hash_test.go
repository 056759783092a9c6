package policy_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// hashSample sets every field of policy.Sandbox, with two rules of each
// kind so that order and boundaries between rules are exercised.
func hashSample() policy.Sandbox {
	o := func(block string, line int) policy.Origin {
		return policy.Origin{Block: block, File: "main.hcl", Line: line}
	}
	return policy.Sandbox{
		Allow: []policy.AllowRule{
			{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: o("egress.llm", 2)},
			{Pattern: policy.MustHostPattern("*.openai.com"), Origin: o("egress.llm", 2)},
		},
		TCP: []policy.TCPRule{
			{Dest: policy.HostPort{Host: "github.com", Port: 22}, Origin: o("egress.git", 7)},
			{Dest: policy.HostPort{Host: "gitlab.com", Port: 22}, Origin: o("egress.git", 7)},
		},
		Hosts: []policy.HostMapping{
			{Name: "api.test", Addr: "127.0.0.1:8443", Origin: o("egress.local", 9)},
			{Name: "ollama.test", Addr: "10.0.2.2:11434", Origin: o("egress.local", 9)},
		},
		Secrets: []policy.SecretBinding{
			{Name: "claude_oauth", Env: "CLAUDE_CODE_OAUTH_TOKEN", Hosts: []policy.HostPattern{policy.MustHostPattern("api.anthropic.com")}, Source: "env:CLAUDE_CODE_OAUTH_TOKEN", Origin: o("secret.claude_oauth", 12)},
			{Name: "openai", Env: "OPENAI_API_KEY", Hosts: []policy.HostPattern{policy.MustHostPattern("*.openai.com")}, Source: "file:~/.openai", Origin: o("secret.openai", 18)},
		},
		Mounts: []policy.Mount{
			{Guest: "/workspace", Host: ".", Access: policy.ReadWrite, Hide: []string{".env", "**/*.pem"}, ReadOnly: []string{".git/hooks"}, Tmpfs: []string{"node_modules"}, Owner: "agent", Origin: o("vfs.workspace", 24)},
			{Guest: "/data", Host: "../data", Access: policy.ReadOnly, Hide: []string{"secret"}, ReadOnly: []string{"a"}, Tmpfs: []string{"b"}, Owner: "root", Origin: o("vfs.data", 30)},
		},
	}
}

// hashSampleFull is hashSample with the request rules, CAs and the
// secrets' headers and plain-HTTP destinations, which came later:
// hashSample itself sets none, so that its hash stays the one every
// policy written before them recorded.
func hashSampleFull() policy.Sandbox {
	p := hashSample()
	p.Allow[0].Methods = []string{"GET", "POST"}
	p.Allow[0].Paths = []string{"/v1/**"}
	p.Allow[0].GitPush = []string{"refs/heads/agent/*"}
	p.Allow[1].Passthrough = true
	p.Allow[1].Methods = []string{"GET"}
	p.Allow[1].Paths = []string{"/a", "/b/*"}
	p.Allow[1].GitPush = []string{"refs/tags/**"}
	p.Secrets[0].Headers = []string{"x-api-key"}
	p.Secrets[1].Headers = []string{"x-goog-api-key"}
	p.Secrets[0].PlainHTTP = []policy.HostPort{{Host: "api.anthropic.com", Port: 80}}
	p.Secrets[1].PlainHTTP = []policy.HostPort{{Host: "local.openai.com", Port: 80}}
	for i := range p.Secrets {
		p.Secrets[i].AWS = &policy.AWSCredential{Services: []string{"s3"}, Regions: []string{"us-east-1"},
			SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"}
		p.Secrets[i].OAuth = &policy.OAuth{TokenURL: "https://auth.example.com/token", RefreshField: "refresh_token",
			ClientID: "client", IDToken: "tokens.id_token", AccessToken: "tokens.access_token",
			RefreshToken: "tokens.refresh_token", RefreshedAt: "last_refresh"}
		p.Secrets[i].File = &policy.SecretFile{Path: "/home/agent/auth.json", Mode: 0o600, Owner: "agent"}
		p.Secrets[i].Body = []policy.BodyField{
			{Host: "auth.example.com", Path: "/token", Form: "client_secret"},
			{Host: "api.example.com", Path: "/v1/login", JSON: "auth.key"},
		}
		p.Secrets[i].WebSocket = &policy.WebSocketField{JSON: "token"}
	}
	p.CAs = []policy.CA{
		{Path: "certs/a.pem", PEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", Origin: policy.Origin{Block: "egress.llm", File: "main.hcl", Line: 3}},
		{Path: "certs/b.pem", PEM: "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n", Origin: policy.Origin{Block: "egress.git", File: "main.hcl", Line: 8}},
	}
	return p
}

// TestHashGolden pins the encoding: the value was computed once from
// hashSample. If it fails, every recorded policy hash changes with it;
// change hashVersion when that is intended and update the value.
func TestHashGolden(t *testing.T) {
	const want = "sha256:9d4e8260b2b787dea19629e533f5c4cf30997bbf725e02331a969cedde434d68"
	if got := policy.Hash(hashSample()); got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}

// TestHashEveryRuleField changes every leaf field of every rule, one at a
// time, found by reflection so that a field added later is covered too:
// each change must change the hash, except changes to an Origin or to
// where a CA's file is (a CA is its content).
func TestHashEveryRuleField(t *testing.T) {
	base := policy.Hash(hashSampleFull())
	paths := hashLeafPaths(reflect.TypeOf(policy.Sandbox{}), "")
	if len(paths) < 20 {
		t.Fatalf("found only %d fields: %v", len(paths), paths)
	}
	for _, path := range paths {
		for _, index := range []int{0, 1} {
			p := hashSampleFull()
			hashMutate(reflect.ValueOf(&p).Elem(), path, index)
			got := policy.Hash(p)
			isOrigin := strings.Contains(path, "Origin") || path == "CAs[].Path"
			if isOrigin && got != base {
				t.Errorf("changing %s of rule %d changed the hash", path, index)
			}
			if !isOrigin && got == base {
				t.Errorf("changing %s of rule %d did not change the hash", path, index)
			}
		}
	}
}

func TestHashRules(t *testing.T) {
	base := policy.Hash(hashSample())
	for name, edit := range map[string]func(*policy.Sandbox){
		"allow rule added": func(p *policy.Sandbox) {
			p.Allow = append(p.Allow, policy.AllowRule{Pattern: policy.MustHostPattern("example.com")})
		},
		"allow rule removed": func(p *policy.Sandbox) { p.Allow = p.Allow[:1] },
		"wildcard widened":   func(p *policy.Sandbox) { p.Allow[0].Pattern = policy.MustHostPattern("*.anthropic.com") },
		"tcp port":           func(p *policy.Sandbox) { p.TCP[0].Dest.Port = 443 },
		"secret host added": func(p *policy.Sandbox) {
			p.Secrets[0].Hosts = append(p.Secrets[0].Hosts, policy.MustHostPattern("api.example.com"))
		},
		"secret host moved to the next secret": func(p *policy.Sandbox) {
			p.Secrets[1].Hosts = append(p.Secrets[1].Hosts, p.Secrets[0].Hosts...)
			p.Secrets[0].Hosts = nil
		},
		"ro to rw":            func(p *policy.Sandbox) { p.Mounts[1].Access = policy.ReadWrite },
		"hide rule removed":   func(p *policy.Sandbox) { p.Mounts[0].Hide = p.Mounts[0].Hide[:1] },
		"hide becomes tmpfs":  func(p *policy.Sandbox) { p.Mounts[0].Tmpfs, p.Mounts[0].Hide = p.Mounts[0].Hide, p.Mounts[0].Tmpfs },
		"mounts reordered":    func(p *policy.Sandbox) { p.Mounts[0], p.Mounts[1] = p.Mounts[1], p.Mounts[0] },
		"all mounts removed":  func(p *policy.Sandbox) { p.Mounts = nil },
		"no policy at all":    func(p *policy.Sandbox) { *p = policy.Sandbox{} },
		"mapping address":     func(p *policy.Sandbox) { p.Hosts[0].Addr = "127.0.0.1:8444" },
		"secret source":       func(p *policy.Sandbox) { p.Secrets[0].Source = "command:pass show claude" },
		"exact becomes a tld": func(p *policy.Sandbox) { p.Allow[1].Pattern.Wildcard = false },
	} {
		p := hashSample()
		edit(&p)
		if policy.Hash(p) == base {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

func TestHashIgnoresOriginsAndNilLists(t *testing.T) {
	base := policy.Hash(hashSample())
	p := hashSample()
	for i := range p.Allow {
		p.Allow[i].Origin = policy.Origin{Block: "egress.other", File: "other.hcl", Line: 99}
	}
	p.Mounts[0].Origin = policy.Origin{}
	if policy.Hash(p) != base {
		t.Errorf("moving rules to another block changed the hash")
	}

	empty := policy.Sandbox{Allow: []policy.AllowRule{}, Mounts: []policy.Mount{{Guest: "/w", Host: ".", Access: policy.ReadOnly, Hide: []string{}}}}
	null := policy.Sandbox{Mounts: []policy.Mount{{Guest: "/w", Host: ".", Access: policy.ReadOnly}}}
	if policy.Hash(empty) != policy.Hash(null) {
		t.Errorf("empty and nil lists hash differently")
	}
	h := policy.Hash(policy.Sandbox{})
	if hex, ok := strings.CutPrefix(h, "sha256:"); !ok || len(hex) != 64 {
		t.Errorf("Hash = %q, want sha256:<64 hex>", h)
	}
}

// hashLeafPaths lists the leaf fields of t as dotted paths; a slice of
// structs contributes its element's fields under "Field[]".
func hashLeafPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		path := prefix + f.Name
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, hashLeafPaths(f.Type, path+".")...)
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, hashLeafPaths(f.Type.Elem(), path+".")...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, hashLeafPaths(f.Type.Elem(), path+"[].")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// hashMutate changes the leaf at path, taking element index of every
// slice on the way (or the last one, for shorter slices).
func hashMutate(v reflect.Value, path string, index int) {
	head, rest, _ := strings.Cut(path, ".")
	name, isSlice := strings.CutSuffix(head, "[]")
	f := v.FieldByName(name)
	if !f.IsValid() {
		panic("no field " + path)
	}
	if isSlice {
		f = f.Index(min(index, f.Len()-1))
	}
	if f.Kind() == reflect.Pointer {
		// A copy, so that the samples' rules do not share what changes.
		c := reflect.New(f.Type().Elem())
		c.Elem().Set(f.Elem())
		f.Set(c)
		f = c.Elem()
	}
	if rest != "" {
		hashMutate(f, rest, index)
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Int:
		f.SetInt(f.Int() + 1)
	case reflect.Uint16, reflect.Uint32:
		f.SetUint(f.Uint() + 1)
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Slice:
		f.Set(reflect.Append(f, reflect.ValueOf("extra")))
	default:
		panic(fmt.Sprintf("cannot mutate %s of kind %s", path, f.Kind()))
	}
}

// TestHashNewFieldsLeftOutWhenEmpty checks that a policy that sets none of
// the request rules or CAs hashes as it did before they existed (the
// golden value above pins that encoding), and that each new field, set
// alone, changes the hash.
func TestHashNewFieldsLeftOutWhenEmpty(t *testing.T) {
	old := hashSample()
	p := hashSample()
	p.CAs = []policy.CA{}
	for i := range p.Allow {
		p.Allow[i].Methods, p.Allow[i].Paths, p.Allow[i].GitPush = []string{}, []string{}, []string{}
	}
	if policy.Hash(p) != policy.Hash(old) {
		t.Errorf("empty request lists and CAs changed the hash")
	}
	for name, edit := range map[string]func(*policy.Sandbox){
		"passthrough": func(p *policy.Sandbox) { p.Allow[0].Passthrough = true },
		"methods":     func(p *policy.Sandbox) { p.Allow[0].Methods = []string{"GET"} },
		"paths":       func(p *policy.Sandbox) { p.Allow[0].Paths = []string{"/v1/**"} },
		"git_push":    func(p *policy.Sandbox) { p.Allow[0].GitPush = []string{"refs/heads/agent/*"} },
		"ca":          func(p *policy.Sandbox) { p.CAs = []policy.CA{{Path: "a.pem", PEM: "x"}} },
	} {
		p := hashSample()
		edit(&p)
		if policy.Hash(p) == policy.Hash(old) {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

// TestHashCAByContent checks that a CA counts by its PEM: renaming the
// file, reordering CAs or listing one twice keeps the hash, a changed PEM
// does not.
func TestHashCAByContent(t *testing.T) {
	base := policy.Hash(hashSampleFull())
	p := hashSampleFull()
	p.CAs[0].Path, p.CAs[1].Path = "z.pem", "other/y.pem"
	p.CAs[0], p.CAs[1] = p.CAs[1], p.CAs[0]
	p.CAs = append(p.CAs, p.CAs[0])
	if policy.Hash(p) != base {
		t.Errorf("renaming, reordering or repeating CA files changed the hash")
	}
	p = hashSampleFull()
	p.CAs[1].PEM = p.CAs[0].PEM
	if policy.Hash(p) == base {
		t.Errorf("a CA whose content changed kept the hash")
	}
}
