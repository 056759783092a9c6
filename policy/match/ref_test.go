package match

import (
	"strings"
	"testing"
)

// TestAnyRef holds the ref matcher the egress engine applies to a
// push's ref updates, including names no ref or pattern would be.
func TestAnyRef(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		ref      string
		want     bool
	}{
		{[]string{"refs/heads/agent/*"}, "refs/heads/agent/x", true},
		{[]string{"refs/heads/agent/*"}, "refs/heads/agent/", true},
		{[]string{"refs/heads/agent/*"}, "refs/heads/agent/x/y", false},
		{[]string{"refs/heads/agent/*"}, "refs/heads/agent", false},
		{[]string{"refs/heads/agent/*"}, "refs/heads/main", false},
		{[]string{"refs/heads/agent/*"}, "refs/heads/agentx", false},
		{[]string{"refs/heads/agent/**"}, "refs/heads/agent/x/y", true},
		{[]string{"refs/heads/agent/**"}, "refs/heads/agent/x", true},
		{[]string{"refs/heads/agent/**"}, "refs/heads/agentx/y", false},
		{[]string{"refs/**/x"}, "refs/heads/a/b/x", true},
		{[]string{"refs/**/x"}, "refs/x", true},
		{[]string{"refs/**/x"}, "refs/heads/x/y", false},
		{[]string{"refs/heads/agent-*"}, "refs/heads/agent-1", true},
		{[]string{"refs/heads/*-wip"}, "refs/heads/a-b-wip", true},
		{[]string{"refs/heads/*-wip"}, "refs/heads/a-wip-b", false},
		{[]string{"refs/heads/main"}, "refs/heads/main", true},
		{[]string{"refs/heads/main"}, "refs/heads/mainx", false},
		{[]string{"refs/heads/main"}, "refs/heads/main/x", false},
		{[]string{"refs/heads/main", "refs/heads/agent/*"}, "refs/heads/agent/z", true},
		{nil, "refs/heads/main", false},
		{[]string{"**"}, "refs/heads/anything/at/all", true},
		{[]string{"refs/heads/**/**/**/z"}, "refs/heads/a/b/c/d/e/f/g/h/i/j/k/y", false},
	} {
		var pats []*Ref
		for _, p := range tc.patterns {
			pats = append(pats, &Ref{src: p, segs: strings.Split(p, "/")})
		}
		if got := AnyRef(pats, tc.ref); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.patterns, tc.ref, got, tc.want)
		}
	}
}
