package command

import (
	"fmt"
	"io"

	"github.com/sbx-dev/sbx/lang"
)

// unknownVerb reports a command sbx does not have to w, as prog ("sbx",
// "sbx help") says it, with the closest command's name when one is close
// ("sbx aply": did you mean apply?), then the list of commands.
func unknownVerb(w io.Writer, prog, name string) {
	var names []string
	for _, v := range verbs() {
		names = append(names, v.name)
	}
	fmt.Fprintf(w, "%s: unknown command %q\n", prog, name)
	if s := lang.Suggest(name, names); s != "" {
		fmt.Fprintf(w, "Did you mean %q?\n", s)
	}
	fmt.Fprintln(w)
	printMainUsage(w)
}
