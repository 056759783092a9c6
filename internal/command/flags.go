package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sbx-dev/sbx/lang"
)

// stringList is a flag that may be repeated; each use appends.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// lockfileMode is the -lockfile flag: empty (update as needed) or
// "readonly" (any needed change is an error).
type lockfileMode string

func (m *lockfileMode) String() string { return string(*m) }

func (m *lockfileMode) Set(v string) error {
	if v != "readonly" {
		return fmt.Errorf("unsupported mode %q; the only mode is readonly", v)
	}
	*m = lockfileMode(v)
	return nil
}

// varFlags are the variable options shared by the commands that load a
// configuration.
type varFlags struct {
	vars     stringList
	varFiles stringList
}

func (v *varFlags) register(fs *flag.FlagSet) {
	fs.Var(&v.vars, "var", "")
	fs.Var(&v.varFiles, "var-file", "")
}

func (v *varFlags) options(env *Env) lang.Options {
	return lang.Options{Vars: v.vars, VarFiles: v.varFiles, Environ: env.Environ}
}

const varUsage = `  -var NAME=VALUE     Set a variable. May be repeated. Overrides
                      -var-file values and SBX_VAR_NAME environment
                      variables, which override defaults.
  -var-file FILE      Read variable values from an HCL file of
                      NAME = VALUE lines. May be repeated.
`

// newFlagSet returns a flag set that reports nothing itself; parseArgs
// turns its errors into messages.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses flags that may appear before, between or after
// positional arguments (so "sbx plan DIR -out x" works), and returns the
// positional arguments. Everything after "--" is positional. On -h it
// prints the verb's usage to stdout; on a bad flag it prints a usage
// error (flagError). In both cases ok is false and code is the exit code.
func parseArgs(env *Env, fs *flag.FlagSet, usage string, args []string) (pos []string, code int, ok bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(env.Stdout, strings.TrimLeft(usage, "\n"))
			return nil, ExitOK, false
		}
		if err != nil {
			flagError(env, fs.Name(), err)
			return nil, ExitError, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, ExitOK, true
		}
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), ExitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// dirArg returns the configuration directory named by the positional
// arguments: none means the current directory.
func dirArg(env *Env, name string, pos []string) (string, bool) {
	switch len(pos) {
	case 0:
		return ".", true
	case 1:
		return pos[0], true
	}
	usageError(env, name, "Invalid arguments", fmt.Sprintf("sbx %s takes at most one directory; got %d arguments: %s", name, len(pos), quoteText(strings.Join(pos, " "))))
	return "", false
}
