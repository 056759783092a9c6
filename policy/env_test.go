package policy_test

import (
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

func TestEnvPatterns(t *testing.T) {
	for _, p := range []string{"MOLTNET_*", "AWS_*", "*_TOKEN", "GITHUB_TOKEN", "*", "A*B*C"} {
		if err := policy.CheckEnvPattern(p); err != nil {
			t.Errorf("CheckEnvPattern(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "AWS_?", "AWS_[A-Z]*", "a/b", `A\*`, "A B", "A=B", "ÄWS"} {
		if err := policy.CheckEnvPattern(p); err == nil {
			t.Errorf("CheckEnvPattern(%q) accepted it", p)
		}
	}
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"MOLTNET_*", "MOLTNET_TOKEN", true},
		{"MOLTNET_*", "MOLTNET_", true},
		{"MOLTNET_*", "MOLTNET", false},
		{"MOLTNET_*", "moltnet_token", false}, // names are case-sensitive
		{"MOLTNET_*", "X_MOLTNET_TOKEN", false},
		{"*_TOKEN", "GITHUB_TOKEN", true},
		{"*_TOKEN", "GITHUB_TOKENS", false},
		{"GITHUB_TOKEN", "GITHUB_TOKEN", true},
		{"GITHUB_TOKEN", "GITHUB_TOKEN2", false},
		{"*", "PATH", true},
	} {
		if got := policy.MatchEnvPattern(c.pattern, c.name); got != c.want {
			t.Errorf("MatchEnvPattern(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
	p := policy.Sandbox{ForbidEnv: []string{"AWS_*", "MOLTNET_*"}}
	if pat, ok := p.ForbiddenEnv("MOLTNET_KEY"); !ok || pat != "MOLTNET_*" {
		t.Errorf("ForbiddenEnv(MOLTNET_KEY) = %q, %v", pat, ok)
	}
	if pat, ok := p.ForbiddenEnv("HOME"); ok {
		t.Errorf("ForbiddenEnv(HOME) = %q", pat)
	}
}

// TestHashForbidEnv checks that forbid_env counts in the hash only when
// set (TestHashGolden pins the hash of a policy without it), by its
// patterns and not by where they are declared.
func TestHashForbidEnv(t *testing.T) {
	base := hashSample()
	empty := hashSample()
	empty.ForbidEnv = []string{}
	empty.ForbidEnvOrigin = policy.Origin{Block: "sandbox.eval", File: "main.hcl", Line: 9}
	if policy.Hash(empty) != policy.Hash(base) {
		t.Error("an empty forbid_env changed the hash")
	}
	set := hashSample()
	set.ForbidEnv = []string{"MOLTNET_*"}
	if policy.Hash(set) == policy.Hash(base) {
		t.Error("forbid_env did not change the hash")
	}
	moved := set
	moved.ForbidEnvOrigin = policy.Origin{Block: "sandbox.other", File: "other.hcl", Line: 1}
	if policy.Hash(moved) != policy.Hash(set) {
		t.Error("the origin of forbid_env changed the hash")
	}
	other := hashSample()
	other.ForbidEnv = []string{"MOLTNET*"}
	if policy.Hash(other) == policy.Hash(set) {
		t.Error("a different pattern hashed the same")
	}
}

// TestCompareForbidEnv checks the direction of forbid_env changes: a
// pattern removed lets names reach the guest again (widening, so that
// -fail-on-widen refuses it), a pattern added narrows.
func TestCompareForbidEnv(t *testing.T) {
	oldOrigin := policy.Origin{Block: "sandbox.eval", File: "main.hcl", Line: 3}
	newOrigin := policy.Origin{Block: "sandbox.eval", File: "main.hcl", Line: 7}
	old := policy.Sandbox{ForbidEnv: []string{"AWS_*", "MOLTNET_*"}, ForbidEnvOrigin: oldOrigin}
	new := policy.Sandbox{ForbidEnv: []string{"GITHUB_TOKEN", "MOLTNET_*"}, ForbidEnvOrigin: newOrigin}
	cs := policy.Compare(old, new)
	if len(cs) != 2 {
		t.Fatalf("Compare = %+v; want two changes", cs)
	}
	want := []policy.Change{
		{Direction: policy.Narrow, Op: policy.RuleAdded, Kind: "forbid_env", Subject: "GITHUB_TOKEN", Origin: newOrigin},
		{Direction: policy.Widen, Op: policy.RuleRemoved, Kind: "forbid_env", Subject: "AWS_*", Origin: oldOrigin},
	}
	for _, w := range want {
		found := false
		for _, c := range cs {
			if c.Kind == w.Kind && c.Subject == w.Subject {
				found = true
				if c.Direction != w.Direction || c.Op != w.Op || c.Origin != w.Origin || c.Detail == "" {
					t.Errorf("change for %s = %+v; want %+v with a detail", w.Subject, c, w)
				}
			}
		}
		if !found {
			t.Errorf("no change for %s in %+v", w.Subject, cs)
		}
	}
	if cs := policy.Compare(old, old); len(cs) != 0 {
		t.Errorf("Compare(old, old) = %+v", cs)
	}
	// Patterns first set on a policy that had none narrow it.
	if cs := policy.Compare(policy.Sandbox{}, new); len(cs) != 2 || cs[0].Direction != policy.Narrow || cs[1].Direction != policy.Narrow {
		t.Errorf("Compare(none, new) = %+v; want two narrowing changes", cs)
	}
}
