package policy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sbx-dev/sbx/policy"
)

func allow(ps ...string) []policy.AllowRule {
	var rs []policy.AllowRule
	for _, p := range ps {
		rs = append(rs, policy.AllowRule{Pattern: policy.MustHostPattern(p), Origin: policy.Origin{Block: "egress.llm", File: "main.hcl", Line: 3}})
	}
	return rs
}

func tcp(ds ...string) []policy.TCPRule {
	var rs []policy.TCPRule
	for _, d := range ds {
		hp, err := policy.ParseHostPort(d)
		if err != nil {
			panic(err)
		}
		rs = append(rs, policy.TCPRule{Dest: hp, Origin: policy.Origin{Block: "egress.git"}})
	}
	return rs
}

func patterns(ps ...string) []policy.HostPattern {
	var out []policy.HostPattern
	for _, p := range ps {
		out = append(out, policy.MustHostPattern(p))
	}
	return out
}

func secret(name, env, source string, hosts ...string) policy.SecretBinding {
	return policy.SecretBinding{Name: name, Env: env, Source: source, Hosts: patterns(hosts...), Origin: policy.Origin{Block: "secret." + name}}
}

func workspace(edit func(m *policy.Mount)) []policy.Mount {
	m := policy.Mount{
		Guest:    "/workspace",
		Host:     ".",
		Access:   policy.ReadWrite,
		Hide:     []string{".env", "**/*.pem"},
		ReadOnly: []string{".git/hooks"},
		Tmpfs:    []string{"node_modules"},
		Owner:    "agent",
		Origin:   policy.Origin{Block: "vfs.workspace", File: "main.hcl", Line: 20},
	}
	if edit != nil {
		edit(&m)
	}
	return []policy.Mount{m}
}

// short is a change reduced to what the tables check.
type short struct {
	Dir     policy.Direction
	Op      policy.Op
	Kind    string
	Subject string
	Detail  string
}

func shorten(cs []policy.Change) []short {
	var out []short
	for _, c := range cs {
		out = append(out, short{c.Direction, c.Op, c.Kind, c.Subject, c.Detail})
	}
	return out
}

func TestCompare(t *testing.T) {
	const (
		W = policy.Widen
		N = policy.Narrow
		Z = policy.Neutral
		A = policy.RuleAdded
		R = policy.RuleRemoved
		M = policy.RuleModified
	)
	base := policy.Sandbox{
		Allow:   allow("api.anthropic.com", "*.openai.com"),
		TCP:     tcp("github.com:22"),
		Hosts:   []policy.HostMapping{{Name: "api.test", Addr: "127.0.0.1:8443"}},
		Secrets: []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")},
		Mounts:  workspace(nil),
	}
	edit := func(f func(p *policy.Sandbox)) policy.Sandbox {
		p := base
		f(&p)
		return p
	}
	// reachedHosts is base with api.test and ollama.test allowed, so
	// that their mappings are used, then changed by f (when not nil).
	reachedHosts := func(f func(p *policy.Sandbox)) policy.Sandbox {
		return edit(func(p *policy.Sandbox) {
			p.Allow = allow("api.anthropic.com", "*.openai.com", "api.test", "ollama.test")
			if f != nil {
				f(p)
			}
		})
	}
	tests := []struct {
		name     string
		old, new policy.Sandbox
		want     []short
	}{
		{name: "equal", old: base, new: base},
		{name: "origin only", old: base, new: edit(func(p *policy.Sandbox) {
			p.Allow = []policy.AllowRule{{Pattern: policy.MustHostPattern("api.anthropic.com"), Origin: policy.Origin{Block: "egress.other", Line: 99}}, p.Allow[1]}
		})},
		{name: "allow added", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.openai.com", "api.example.com") }),
			want: []short{{W, A, "allow", "api.example.com", "adds host api.example.com"}}},
		{name: "allow wildcard added", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.openai.com", "*.example.com") }),
			want: []short{{W, A, "allow", "*.example.com", "adds hosts matching *.example.com"}}},
		{name: "allow removed", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("*.openai.com") }),
			want: []short{{N, R, "allow", "api.anthropic.com", "removes host api.anthropic.com"}}},
		{name: "allow broadened", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("*.anthropic.com", "*.openai.com") }),
			want: []short{{W, A, "allow", "*.anthropic.com", "broadens api.anthropic.com to *.anthropic.com"}}},
		{name: "allow narrowed wildcard", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "api.openai.com") }),
			want: []short{{N, R, "allow", "*.openai.com", "narrows *.openai.com to api.openai.com"}}},
		{name: "allow narrowed to deeper wildcard", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.eu.openai.com") }),
			want: []short{{N, R, "allow", "*.openai.com", "narrows *.openai.com to *.eu.openai.com"}}},
		{name: "allow redundant added", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.openai.com", "api.openai.com") }),
			want: []short{{Z, A, "allow", "api.openai.com", "adds api.openai.com, already allowed by *.openai.com"}}},
		{name: "allow redundant removed",
			old:  edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.openai.com", "api.openai.com") }),
			new:  base,
			want: []short{{Z, R, "allow", "api.openai.com", "removes api.openai.com, still allowed by *.openai.com"}}},
		{name: "allow swapped", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "chatgpt.com") }),
			want: []short{
				{N, R, "allow", "*.openai.com", "removes hosts matching *.openai.com"},
				{W, A, "allow", "chatgpt.com", "adds host chatgpt.com"},
			}},
		{name: "tcp added", old: base, new: edit(func(p *policy.Sandbox) { p.TCP = tcp("github.com:22", "gitlab.com:22") }),
			want: []short{{W, A, "tcp", "gitlab.com:22", "adds raw TCP to gitlab.com:22"}}},
		{name: "tcp removed", old: base, new: edit(func(p *policy.Sandbox) { p.TCP = nil }),
			want: []short{{N, R, "tcp", "github.com:22", "removes raw TCP to github.com:22"}}},
		{name: "tcp port changed", old: base, new: edit(func(p *policy.Sandbox) { p.TCP = tcp("github.com:443") }),
			want: []short{
				{N, R, "tcp", "github.com:22", "removes raw TCP to github.com:22"},
				{W, A, "tcp", "github.com:443", "adds raw TCP to github.com:443"},
			}},
		// Mappings count only for names the sandbox reaches: reachedHosts
		// allows api.test and ollama.test.
		{name: "hosts added", old: reachedHosts(nil), new: reachedHosts(func(p *policy.Sandbox) {
			p.Hosts = []policy.HostMapping{{Name: "api.test", Addr: "127.0.0.1:8443"}, {Name: "ollama.test", Addr: "127.0.0.1:11434"}}
		}), want: []short{{W, A, "hosts", "ollama.test", "maps ollama.test to 127.0.0.1:11434"}}},
		{name: "hosts address changed", old: reachedHosts(nil), new: reachedHosts(func(p *policy.Sandbox) {
			p.Hosts = []policy.HostMapping{{Name: "api.test", Addr: "10.0.0.5:443"}}
		}), want: []short{{W, M, "hosts", "api.test", "maps api.test to 10.0.0.5:443 instead of 127.0.0.1:8443"}}},
		{name: "hosts removed", old: reachedHosts(nil), new: reachedHosts(func(p *policy.Sandbox) {
			p.Hosts = nil
			p.Allow = allow("api.anthropic.com", "*.openai.com", "ollama.test")
		}), want: []short{
			{N, R, "allow", "api.test", "removes host api.test"},
			{N, R, "hosts", "api.test", "removes the mapping of api.test to 127.0.0.1:8443"},
		}},
		// A mapping of a name nothing allows is unused: adding, moving or
		// removing it changes nothing the guest can do.
		{name: "unused hosts", old: base, new: edit(func(p *policy.Sandbox) {
			p.Hosts = []policy.HostMapping{{Name: "api.test", Addr: "10.0.0.5:443"}, {Name: "ollama.test", Addr: "127.0.0.1:11434"}}
		})},
		{name: "unused hosts removed", old: base, new: edit(func(p *policy.Sandbox) { p.Hosts = nil })},
		// One that comes into use widens as a new mapping does; one that
		// goes out of use narrows.
		{name: "hosts come into use", old: base, new: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.openai.com", "api.test") }), want: []short{
			{W, A, "allow", "api.test", "adds host api.test"},
			{W, A, "hosts", "api.test", "maps api.test to 127.0.0.1:8443"},
		}},
		{name: "hosts go out of use", old: edit(func(p *policy.Sandbox) { p.Allow = allow("api.anthropic.com", "*.openai.com", "api.test") }), new: base, want: []short{
			{N, R, "allow", "api.test", "removes host api.test"},
			{N, R, "hosts", "api.test", "the mapping of api.test to 127.0.0.1:8443 is no longer used: nothing reaches api.test"},
		}},
		// A name the sandbox reaches that loses its mapping is dialled
		// wherever public DNS points, and so is a secret sent to it.
		{name: "hosts removed from a reached name",
			old: edit(func(p *policy.Sandbox) {
				p.Allow = allow("api.anthropic.com", "*.openai.com", "api.test")
				p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com", "api.test")}
			}),
			new: edit(func(p *policy.Sandbox) {
				p.Allow = allow("api.anthropic.com", "*.openai.com", "api.test")
				p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com", "api.test")}
				p.Hosts = nil
			}),
			want: []short{
				{W, R, "hosts", "api.test", "removes the mapping of api.test to 127.0.0.1:8443: connections to api.test go wherever public DNS points"},
				{W, M, "secret.hosts", "claude", "secret claude is sent to host api.test wherever public DNS points instead of at 127.0.0.1:8443"},
			}},
		{name: "secret host mapped",
			old: edit(func(p *policy.Sandbox) { p.Hosts = nil }),
			new: edit(func(p *policy.Sandbox) {
				p.Hosts = []policy.HostMapping{{Name: "api.anthropic.com", Addr: "127.0.0.1:9000"}}
			}),
			want: []short{
				{W, A, "hosts", "api.anthropic.com", "maps api.anthropic.com to 127.0.0.1:9000"},
				{W, M, "secret.hosts", "claude", "secret claude is sent to host api.anthropic.com at 127.0.0.1:9000 instead of wherever public DNS points"},
			}},
		{name: "secret host no longer spliced",
			old: edit(func(p *policy.Sandbox) {
				p.TCP = tcp("github.com:22", "api.anthropic.com:443")
			}),
			new: base,
			want: []short{
				{N, R, "tcp", "api.anthropic.com:443", "removes raw TCP to api.anthropic.com:443"},
				{W, M, "secret.hosts", "claude", "secret claude is now also sent to host api.anthropic.com on port 443, whose requests are now inspected"},
			}},
		{name: "secret added", old: base, new: edit(func(p *policy.Sandbox) {
			p.Secrets = append([]policy.SecretBinding{}, p.Secrets...)
			p.Secrets = append(p.Secrets, secret("openai", "OPENAI_API_KEY", "file:/run/keys/openai", "api.openai.com", "*.chatgpt.com"))
		}), want: []short{{W, A, "secret", "openai", "brokers secret openai in $OPENAI_API_KEY from file:/run/keys/openai for *.chatgpt.com, api.openai.com"}}},
		{name: "secret removed", old: base, new: edit(func(p *policy.Sandbox) { p.Secrets = nil }),
			want: []short{{N, R, "secret", "claude", "stops brokering secret claude ($CLAUDE_CODE_OAUTH_TOKEN)"}}},
		{name: "secret host added", old: base, new: edit(func(p *policy.Sandbox) {
			p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com", "console.anthropic.com")}
		}), want: []short{{W, A, "secret.hosts", "claude", "secret claude is also sent to host console.anthropic.com"}}},
		{name: "secret host broadened", old: base, new: edit(func(p *policy.Sandbox) {
			p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "*.anthropic.com")}
		}), want: []short{{W, A, "secret.hosts", "claude", "secret claude is sent to *.anthropic.com instead of api.anthropic.com"}}},
		{name: "secret host removed",
			old: edit(func(p *policy.Sandbox) {
				p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com", "console.anthropic.com")}
			}),
			new:  base,
			want: []short{{N, R, "secret.hosts", "claude", "secret claude is no longer sent to host console.anthropic.com"}}},
		{name: "secret host narrowed",
			old: edit(func(p *policy.Sandbox) {
				p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "*.anthropic.com")}
			}),
			new:  base,
			want: []short{{N, R, "secret.hosts", "claude", "secret claude is sent to api.anthropic.com instead of *.anthropic.com"}}},
		{name: "secret source changed", old: base, new: edit(func(p *policy.Sandbox) {
			p.Secrets = []policy.SecretBinding{secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "file:/run/claude-token", "api.anthropic.com")}
		}), want: []short{{W, M, "secret.source", "claude", "a different credential is brokered for secret claude: file:/run/claude-token instead of env:CLAUDE_CODE_OAUTH_TOKEN"}}},
		{name: "secret env renamed", old: base, new: edit(func(p *policy.Sandbox) {
			p.Secrets = []policy.SecretBinding{secret("claude", "ANTHROPIC_API_KEY", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")}
		}), want: []short{{Z, M, "secret.env", "claude", "secret claude moves from $CLAUDE_CODE_OAUTH_TOKEN to $ANTHROPIC_API_KEY"}}},
		{name: "secret header added", old: base, new: edit(func(p *policy.Sandbox) {
			s := secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")
			s.Headers = []string{"x-api-key"}
			p.Secrets = []policy.SecretBinding{s}
		}), want: []short{{W, A, "secret.headers", "claude", "secret claude is also substituted as the whole value of header x-api-key"}}},
		{name: "secret header removed", old: edit(func(p *policy.Sandbox) {
			s := secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")
			s.Headers = []string{"x-api-key", "x-goog-api-key"}
			p.Secrets = []policy.SecretBinding{s}
		}), new: edit(func(p *policy.Sandbox) {
			s := secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")
			s.Headers = []string{"x-goog-api-key"}
			p.Secrets = []policy.SecretBinding{s}
		}), want: []short{{N, R, "secret.headers", "claude", "secret claude is no longer substituted in header x-api-key"}}},
		{name: "secret plain HTTP added", old: base, new: edit(func(p *policy.Sandbox) {
			s := secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")
			s.PlainHTTP = []policy.HostPort{{Host: "api.anthropic.com", Port: 80}}
			p.Secrets = []policy.SecretBinding{s}
		}), want: []short{{W, A, "secret.plain_http", "claude", "secret claude may be sent unencrypted, over plain HTTP, to api.anthropic.com:80"}}},
		{name: "secret plain HTTP removed", old: edit(func(p *policy.Sandbox) {
			s := secret("claude", "CLAUDE_CODE_OAUTH_TOKEN", "env:CLAUDE_CODE_OAUTH_TOKEN", "api.anthropic.com")
			s.PlainHTTP = []policy.HostPort{{Host: "api.anthropic.com", Port: 80}}
			p.Secrets = []policy.SecretBinding{s}
		}), new: base, want: []short{{N, R, "secret.plain_http", "claude", "secret claude is no longer sent over plain HTTP to api.anthropic.com:80"}}},
		{name: "secret added with plain HTTP", old: policy.Sandbox{}, new: policy.Sandbox{Secrets: []policy.SecretBinding{func() policy.SecretBinding {
			s := secret("fixture", "TOKEN", "env:TOKEN", "local.test")
			s.PlainHTTP = []policy.HostPort{{Host: "local.test", Port: 80}}
			return s
		}()}}, want: []short{
			{W, A, "secret", "fixture", "brokers secret fixture in $TOKEN from env:TOKEN for local.test"},
			{W, A, "secret.plain_http", "fixture", "secret fixture may be sent unencrypted, over plain HTTP, to local.test:80"},
		}},
		{name: "mount added", old: policy.Sandbox{}, new: edit(func(p *policy.Sandbox) { *p = policy.Sandbox{Mounts: workspace(nil)} }),
			want: []short{{W, A, "mount", "/workspace", `mounts . at /workspace (rw; hide ".env", "**/*.pem"; read-only ".git/hooks"; tmpfs "node_modules")`}}},
		{name: "mount removed", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = nil }),
			want: []short{{N, R, "mount", "/workspace", "removes mount /workspace (.)"}}},
		{name: "mount host changed", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.Host = ".." }) }),
			want: []short{{W, M, "mount.host", "/workspace", "/workspace now mounts .. instead of ."}}},
		{name: "mount ro to rw", old: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.Access = policy.ReadOnly }) }), new: base,
			want: []short{{W, M, "mount.access", "/workspace", "/workspace becomes writable (ro -> rw)"}}},
		{name: "mount rw to ro", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.Access = policy.ReadOnly }) }),
			want: []short{{N, M, "mount.access", "/workspace", "/workspace becomes read-only (rw -> ro)"}}},
		{name: "hide removed", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.Hide = []string{"**/*.pem"} }) }),
			want: []short{{W, R, "mount.hide", "/workspace", `hide rule ".env" removed from /workspace`}}},
		{name: "hide added", old: base, new: edit(func(p *policy.Sandbox) {
			p.Mounts = workspace(func(m *policy.Mount) { m.Hide = []string{".env", "**/*.pem", ".git/config"} })
		}), want: []short{{N, A, "mount.hide", "/workspace", `hide rule ".git/config" added to /workspace`}}},
		{name: "readonly removed", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.ReadOnly = nil }) }),
			want: []short{{W, R, "mount.readonly", "/workspace", `read-only rule ".git/hooks" removed from /workspace`}}},
		{name: "readonly added", old: base, new: edit(func(p *policy.Sandbox) {
			p.Mounts = workspace(func(m *policy.Mount) { m.ReadOnly = []string{".git/hooks", "vendor"} })
		}), want: []short{{N, A, "mount.readonly", "/workspace", `read-only rule "vendor" added to /workspace`}}},
		{name: "tmpfs removed", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.Tmpfs = nil }) }),
			want: []short{{W, R, "mount.tmpfs", "/workspace", `tmpfs rule "node_modules" removed from /workspace (writes now reach the host)`}}},
		{name: "tmpfs added", old: base, new: edit(func(p *policy.Sandbox) {
			p.Mounts = workspace(func(m *policy.Mount) { m.Tmpfs = []string{"node_modules", ".cache"} })
		}), want: []short{{N, A, "mount.tmpfs", "/workspace", `tmpfs rule ".cache" added to /workspace`}}},
		{name: "git metadata made writable", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.GitWritable = true }) }),
			want: []short{{W, M, "mount.git_metadata", "/workspace", "the guest may now write the git configuration, hooks and redirections in /workspace, which git on the host reads and runs"}}},
		{name: "git metadata protected again", old: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.GitWritable = true }) }), new: base,
			want: []short{{N, M, "mount.git_metadata", "/workspace", "the git configuration, hooks and redirections in /workspace become read-only to the guest"}}},
		{name: "mount added with writable git metadata", old: policy.Sandbox{}, new: edit(func(p *policy.Sandbox) {
			*p = policy.Sandbox{Mounts: workspace(func(m *policy.Mount) { m.GitWritable = true })}
		}), want: []short{{W, A, "mount", "/workspace", `mounts . at /workspace (rw; hide ".env", "**/*.pem"; read-only ".git/hooks"; tmpfs "node_modules"; git metadata writable)`}}},
		{name: "owner changed", old: base, new: edit(func(p *policy.Sandbox) { p.Mounts = workspace(func(m *policy.Mount) { m.Owner = "root" }) }),
			want: []short{{Z, M, "mount.owner", "/workspace", "owner of /workspace changes from agent to root"}}},
		{name: "ordered by kind then subject", old: base, new: edit(func(p *policy.Sandbox) {
			p.Allow = allow("api.anthropic.com", "*.openai.com", "b.example.com", "a.example.com")
			p.TCP = nil
			p.Mounts = workspace(func(m *policy.Mount) { m.Hide = nil; m.Access = policy.ReadOnly })
		}), want: []short{
			{W, A, "allow", "a.example.com", "adds host a.example.com"},
			{W, A, "allow", "b.example.com", "adds host b.example.com"},
			{N, R, "tcp", "github.com:22", "removes raw TCP to github.com:22"},
			{N, M, "mount.access", "/workspace", "/workspace becomes read-only (rw -> ro)"},
			{W, R, "mount.hide", "/workspace", `hide rule "**/*.pem" removed from /workspace`},
			{W, R, "mount.hide", "/workspace", `hide rule ".env" removed from /workspace`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shorten(policy.Compare(tt.old, tt.new))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareOrigins(t *testing.T) {
	old := policy.Sandbox{Mounts: workspace(func(m *policy.Mount) { m.Origin = policy.Origin{Block: "vfs.old"} })}
	new := policy.Sandbox{
		Allow:  allow("api.example.com"),
		Mounts: workspace(func(m *policy.Mount) { m.Hide = nil; m.Origin = policy.Origin{Block: "vfs.new"} }),
	}
	for _, c := range policy.Compare(old, new) {
		want := "vfs.new"
		if c.Kind == "allow" {
			want = "egress.llm"
		}
		if c.Origin.Block != want {
			t.Errorf("%s %s: origin %q, want %q", c.Kind, c.Detail, c.Origin.Block, want)
		}
	}
	removed := policy.Compare(old, policy.Sandbox{})
	if len(removed) != 1 || removed[0].Origin.Block != "vfs.old" {
		t.Errorf("a removal names the old rule's origin: got %+v", removed)
	}
}

// TestCompareSymmetric checks that swapping old and new turns every widening
// into a narrowing and back, for changes whose classification is symmetric.
func TestCompareSymmetric(t *testing.T) {
	a := policy.Sandbox{
		Allow:   allow("api.anthropic.com", "*.openai.com"),
		TCP:     tcp("github.com:22"),
		Secrets: []policy.SecretBinding{secret("claude", "T", "env:T", "api.anthropic.com")},
		Mounts:  workspace(nil),
	}
	b := policy.Sandbox{
		Allow:  allow("api.openai.com", "chatgpt.com"),
		Mounts: workspace(func(m *policy.Mount) { m.Access = policy.ReadOnly; m.Hide = []string{".env", "**/*.pem", "secrets"} }),
	}
	count := func(cs []policy.Change) (w, n int) {
		for _, c := range cs {
			switch c.Direction {
			case policy.Widen:
				w++
			case policy.Narrow:
				n++
			}
		}
		return w, n
	}
	w1, n1 := count(policy.Compare(a, b))
	w2, n2 := count(policy.Compare(b, a))
	if w1 != n2 || n1 != w2 || w1+n1 == 0 {
		t.Errorf("a→b: %d widening, %d narrowing; b→a: %d widening, %d narrowing", w1, n1, w2, n2)
	}
}

func TestSourceLabel(t *testing.T) {
	for in, want := range map[string]string{
		"env:CLAUDE_CODE_OAUTH_TOKEN":       "env:CLAUDE_CODE_OAUTH_TOKEN",
		"file:/run/keys/openai":             "file:/run/keys/openai",
		"command:op read op://vault/claude": "command:op …",
		"command:pass":                      "command:pass",
		"":                                  "the user's bindings",
	} {
		if got := policy.SourceLabel(in); got != want {
			t.Errorf("SourceLabel(%q) = %q, want %q", in, got, want)
		}
	}
	c := policy.Compare(policy.Sandbox{}, policy.Sandbox{Secrets: []policy.SecretBinding{secret("k", "K", "command:echo sk-live-123", "api.example.com")}})
	if len(c) != 1 || strings.Contains(c[0].Detail, "sk-live-123") {
		t.Errorf("command arguments leak into the change: %+v", c)
	}
}
