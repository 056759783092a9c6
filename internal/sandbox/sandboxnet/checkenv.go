package sandboxnet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sbx-dev/sbx/internal/egress/secretsrc"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/policy"
)

// CheckEnv refuses environment entries ("KEY=value", or a bare KEY) that
// a command started in the sandbox may not be given:
//
//   - a variable named as a secret's env: that name is reserved for the
//     secret's placeholder, which the guest already has there (the spec
//     refuses the same collision between its own env and a secret's);
//   - a value that holds a placeholder of one of the policy's secrets
//     (secretsrc.HasPlaceholder: any placeholder shaped for the
//     secret's name, so it is refused before the sandbox has made its
//     own): the host puts the secret's real value in its place in
//     requests to the secret's hosts, so such a value is the credential
//     under another name, which only the secret's env may carry;
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
		v, _ := strings.CutPrefix(kv, k+"=")
		if v == kv {
			v = "" // a bare name
		}
		for _, s := range p.Secrets {
			if slices.Contains(secretEnvs(s), k) {
				return fmt.Errorf("%s is reserved for the placeholder of secret.%s, which the guest has there already; a command cannot set it (use another name, or change the secret's env)", k, s.Name)
			}
			if secretsrc.HasPlaceholder(v, s.Name) {
				return fmt.Errorf("the value of %s holds a placeholder of secret.%s, which the host replaces with the secret's value where a credential goes in requests to its hosts; a command cannot be given one (the guest has it in %s)", k, s.Name, s.Env)
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
