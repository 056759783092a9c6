package lang

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

// attrForbidEnv evaluates a sandbox's forbid_env: patterns of variable
// names (policy.CheckEnvPattern) that never reach its guest's
// environment. They are returned sorted, without repeats, with the
// attribute's origin.
func (l *loader) attrForbidEnv(sb *Sandbox, a *hcl.Attribute) ([]string, policy.Origin) {
	items, _ := l.attrStrings(a)
	var pats []string
	for _, it := range items {
		if err := policy.CheckEnvPattern(it.Value); err != nil {
			l.errorf(it.Range, "Invalid forbid_env pattern", "%v.", err)
			continue
		}
		pats = append(pats, it.Value)
	}
	return sortedUnique(pats), l.origin("sandbox."+sb.Name, a.NameRange)
}

// checkForbiddenEnv refuses every name the guest's environment of sb
// would get from the configuration that one of its forbid_env patterns
// matches — its own env, its image's env and its secrets' placeholder
// variables — each at the place that sets it. It also refuses an image
// env name that one of the sandbox's secrets sets: which of the two the
// guest would see is not something a spec should leave to chance (the
// sandbox's own env is checked against secrets by sandboxPolicy).
func (l *loader) checkForbiddenEnv(sb *Sandbox, env []item, secrets []blockRef) {
	pol := sb.Policy
	where := originText(pol.ForbidEnvOrigin)
	for _, it := range env {
		if pat, ok := pol.ForbiddenEnv(it.Key); ok {
			l.errorf(it.KeyRange, "Forbidden environment variable",
				"%s matches the forbid_env pattern %q of sandbox.%s (%s): a name it matches never reaches the guest, so the sandbox's env cannot set it.",
				it.Key, pat, sb.Name, where)
		}
	}
	secretOf := map[string]string{}
	for _, r := range secrets {
		s := l.cfg.Secrets[r.name]
		if s == nil || s.Env == "" {
			continue
		}
		secretOf[s.Env] = s.Name
		if pat, ok := pol.ForbiddenEnv(s.Env); ok {
			rng, known := l.secretEnv[s.Name]
			if !known {
				rng = r.rng
			}
			l.errorf(rng, "Forbidden environment variable",
				"secret.%s puts its placeholder in %s, which the forbid_env pattern %q of sandbox.%s (%s) keeps out of the guest's environment. Give the secret another env, or narrow the pattern.",
				s.Name, s.Env, pat, sb.Name, where)
		}
	}
	if l.cfg.Images[sb.Image] == nil {
		return
	}
	for _, it := range l.imageEnv[sb.Image] {
		if pat, ok := pol.ForbiddenEnv(it.Key); ok {
			l.errorf(it.KeyRange, "Forbidden environment variable",
				"image.%s sets %s, which the forbid_env pattern %q of sandbox.%s (%s) keeps out of the guest's environment. Remove it from the image's env, or give the sandbox another image.",
				sb.Image, it.Key, pat, sb.Name, where)
		}
		if s, ok := secretOf[it.Key]; ok {
			l.errorf(it.KeyRange, "Environment variable set by a secret",
				"%s is the placeholder variable of secret.%s in sandbox.%s; the env of image.%s cannot set it too.",
				it.Key, s, sb.Name, sb.Image)
		}
	}
}

// originText renders "sandbox.eval, main.hcl:12".
func originText(o policy.Origin) string {
	if o.File == "" {
		return o.Block
	}
	return fmt.Sprintf("%s, %s:%d", o.Block, o.File, o.Line)
}
