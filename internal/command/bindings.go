package command

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/lang"
)

// bindingsHelp is what the usage of each verb that reads the bindings
// file says of it.
const bindingsHelp = `  Where this host reads each secret's value is bound in your bindings file,
  outside any repository: $SBX_BINDINGS, else $XDG_CONFIG_HOME/sbx/bindings.hcl,
  by default ~/.config/sbx/bindings.hcl (docs/language.md). A binding wins
  over the spec's source; a spec's env: and file: sources are read when
  nothing binds the secret, and a command a spec names is never run.
`

// loadBindings reads the user's bindings file (bindings.Find), printing
// its diagnostics; ok is false when it is refused or invalid.
func loadBindings(v *view, env *Env) (*bindings.File, bool) {
	f, ds := bindings.Find(env.Environ)
	var files map[string]*hcl.File
	if f != nil && f.HCL != nil {
		files = map[string]*hcl.File{f.Path: f.HCL}
	}
	v.diagnostics(files, ds)
	return f, !ds.HasErrors()
}

// checkSecrets reads the bindings file and checks that every secret of
// sb has a source this host may read (bindings.Check), before anything
// is built, printing what to bind where one has none.
func checkSecrets(v *view, env *Env, cfg *lang.Config, sb *lang.Sandbox) (*bindings.File, bool) {
	f, ok := loadBindings(v, env)
	if !ok {
		return nil, false
	}
	if err := bindings.Check(f, cfg.Dir, sb.Policy); err != nil {
		v.errorDetail(fmt.Sprintf("Cannot start %s: a secret has no source this host may read", sb.Addr()), quoteErr(err))
		return nil, false
	}
	return f, true
}
