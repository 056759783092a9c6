package sandboxnet

import (
	"fmt"

	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/policy"
)

// CheckEnv refuses environment entries ("KEY=value", or a bare KEY) that
// a command started in the sandbox may not be given:
//
//   - a variable carrying a secret's placeholder: a command given its
//     own value there would send it where the placeholder goes (and the
//     spec already refuses such a collision between its own env and a
//     secret's);
//   - a variable whose name matches one of the policy's forbid_env
//     patterns: those names never reach the guest, whoever sets them
//     (sbx exec -e, sbx run -e, the Go API). The error names the pattern
//     and where the spec declares it.
//
// Values never appear in an error. Package lang refuses the same names
// in the spec's own environments, so a command's defaults pass.
func CheckEnv(p policy.Sandbox, env []string) error {
	for _, kv := range env {
		k := hostenv.Name(kv)
		for _, s := range p.Secrets {
			if s.Env == k {
				return fmt.Errorf("%s carries the placeholder of secret.%s; a command cannot set it (rename the variable, or change the secret's env)", k, s.Name)
			}
		}
		if pat, ok := p.ForbiddenEnv(k); ok {
			return fmt.Errorf("%s is forbidden in the guest's environment by forbid_env pattern %q%s", k, pat, originSuffix(p.ForbidEnvOrigin))
		}
	}
	return nil
}

// originSuffix renders " (sandbox.eval, main.hcl:12)", or nothing when
// the origin is unknown.
func originSuffix(o policy.Origin) string {
	where := o.Block
	if o.File != "" {
		if where != "" {
			where += ", "
		}
		where += o.File
		if o.Line > 0 {
			where += fmt.Sprintf(":%d", o.Line)
		}
	}
	if where == "" {
		return ""
	}
	return " (" + where + ")"
}
