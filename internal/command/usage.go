package command

import (
	"fmt"
	"strings"
)

// A usage error is a command line sbx cannot run as written. It is
// printed as every other error is (view.render): one diagnostic whose
// summary names what is wrong — "Invalid -parallelism", "Unknown option
// -x", "Missing value for -out", "Conflicting options", "Invalid
// arguments" — and whose detail says it with the value given, then
// points at the verb's help: Run "sbx VERB -h" for its options. Its exit
// code is ExitError.

// usageHint is the last line of a usage error's detail.
func usageHint(verb string) string {
	return fmt.Sprintf("Run \"sbx %s -h\" for its options.", verb)
}

// usageError prints a usage error of verb: summary, then detail and the
// hint to verb's help.
func (v *view) usageError(verb, summary, detail string) {
	v.errorDetail(summary, detail+"\n"+usageHint(verb))
}

// usageError prints a usage error of verb to env's stderr, for a verb
// that has no view yet.
func usageError(env *Env, verb, summary, detail string) {
	newView(env, false).usageError(verb, summary, detail)
}

// errorDetail prints an error with a detail paragraph to env's stderr,
// for code that has no view.
func errorDetail(env *Env, summary, detail string) {
	newView(env, false).errorDetail(summary, detail)
}

// errorFrom prints err as an error saying summary to env's stderr, as
// view.errorFrom does, for code that has no view.
func errorFrom(env *Env, summary string, err error, quote bool) {
	newView(env, false).errorFrom(summary, err, quote)
}

// warning prints a warning with a detail paragraph to env's stderr.
func warning(env *Env, summary, detail string) {
	newView(env, false).warning(summary, detail)
}

// flagError prints an error of package flag (a flag set parsed with
// flag.ContinueOnError) as a usage error of verb, its summary naming the
// option: "Unknown option -x", "Missing value for -out", "Invalid
// -parallelism".
func flagError(env *Env, verb string, err error) {
	usageError(env, verb, flagSummary(err), err.Error())
}

// flagSummary names what package flag's error err is about. Package
// flag's messages are stable text; an unknown one is "Invalid option".
func flagSummary(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "Unknown option " + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "Missing value for " + name
	}
	for _, marker := range []string{" for flag -", " for -"} {
		if strings.HasPrefix(msg, "invalid ") {
			if _, rest, ok := strings.Cut(msg, marker); ok {
				name, _, _ := strings.Cut(rest, ":")
				return "Invalid -" + name
			}
		}
	}
	return "Invalid option"
}
