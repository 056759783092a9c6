package command

import (
	"fmt"

	"github.com/sbx-dev/sbx/lang"
)

// unknownVerb reports a command sbx does not have, as prog ("sbx",
// "sbx help") says it, as an error diagnostic naming the closest
// command when one is close ("sbx aply": did you mean apply?), then the
// list of commands.
func unknownVerb(env *Env, prog, name string) {
	var names []string
	for _, v := range verbs() {
		names = append(names, v.name)
	}
	detail := fmt.Sprintf("%s has no command %q.", prog, name)
	if s := lang.Suggest(name, names); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	}
	errorDetail(env, fmt.Sprintf("Unknown command %q", name), detail)
	printMainUsage(env.Stderr)
}
