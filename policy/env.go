package policy

import (
	"fmt"
	"path"
)

// CheckEnvPattern checks one forbid_env pattern: an environment variable
// name (letters, digits and underscores) in which "*" stands for any run
// of characters, as in "MOLTNET_*". Nothing else is special, so a pattern
// says exactly which names it covers.
func CheckEnvPattern(p string) error {
	if p == "" {
		return fmt.Errorf("the pattern is empty")
	}
	for _, c := range p {
		if !(c == '_' || c == '*' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fmt.Errorf("%q has %q; a pattern is a variable name with \"*\" for any run of characters", p, c)
		}
	}
	return nil
}

// MatchEnvPattern reports whether the variable name matches pattern, a
// pattern CheckEnvPattern accepts. Names are compared case-sensitively,
// as the guest's environment compares them.
func MatchEnvPattern(pattern, name string) bool {
	// Names and checked patterns hold no "/", "?", "[" or "\", so
	// path.Match sees only literal characters and "*".
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// ForbiddenEnv returns the first of p's ForbidEnv patterns that the
// variable name matches.
func (p Sandbox) ForbiddenEnv(name string) (string, bool) {
	for _, pat := range p.ForbidEnv {
		if MatchEnvPattern(pat, name) {
			return pat, true
		}
	}
	return "", false
}

// compareForbidEnv classifies forbid_env patterns by set: a pattern added
// narrows (names matching it can no longer be set), a pattern removed
// widens. Patterns are not compared by what they cover, so replacing
// "AWS_*" by "AWS_SECRET_*" is a widening and a narrowing, and the
// widening is what -fail-on-widen sees.
func compareForbidEnv(old, new Sandbox) []Change {
	before, after := toSet(old.ForbidEnv), toSet(new.ForbidEnv)
	var cs []Change
	for _, p := range new.ForbidEnv {
		if !before[p] {
			cs = append(cs, Change{Direction: Narrow, Op: RuleAdded, Kind: "forbid_env", Subject: p,
				Detail: fmt.Sprintf("environment variables matching %q can no longer reach the guest", p), Origin: new.ForbidEnvOrigin})
		}
	}
	for _, p := range old.ForbidEnv {
		if !after[p] {
			cs = append(cs, Change{Direction: Widen, Op: RuleRemoved, Kind: "forbid_env", Subject: p,
				Detail: fmt.Sprintf("environment variables matching %q may reach the guest again", p), Origin: old.ForbidEnvOrigin})
		}
	}
	return cs
}
