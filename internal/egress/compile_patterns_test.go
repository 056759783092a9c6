package egress

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// TestCompileRefusesWhatLangRefuses: the engine compiles request path and
// ref patterns with policy/match, as lang validates them, so a policy
// that bypassed lang is refused rather than matched. Before, the engine
// checked only that a ref pattern starts with "refs/", and accepted
// "refs/heads/a..b", "refs/heads" or "refs/heads/[ab]"; now it refuses
// them as lang does.
func TestCompileRefusesWhatLangRefuses(t *testing.T) {
	compile := func(paths, refs []string) error {
		_, err := Compile(policy.Sandbox{Allow: []policy.AllowRule{{
			Pattern: policy.MustHostPattern("git.test"), Paths: paths, GitPush: refs, Origin: origin("egress.git", 3),
		}}}, nil, nil)
		return err
	}
	for _, ref := range []string{"refs/heads/a..b", "refs/heads", "refs/heads/[ab]", "refs/heads/x.lock", "refs/heads/a b", "refs/heads/**x"} {
		if err := compile(nil, []string{ref}); err == nil || !strings.Contains(err.Error(), ref) {
			t.Errorf("git_push %q: Compile = %v, want an error naming it", ref, err)
		}
	}
	for _, p := range []string{"/a//b", "v1", "/a/**b", "/a%2Fb", "/a/../b"} {
		if err := compile([]string{p}, nil); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("paths %q: Compile = %v, want an error naming it", p, err)
		}
	}
	if err := compile([]string{"/v1/**", "/a/*/b/"}, []string{"refs/heads/agent/*", "refs/**"}); err != nil {
		t.Errorf("valid patterns: %v", err)
	}
}
