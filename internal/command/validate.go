package command

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/lang"
)

const validateUsage = `
Usage: sbx validate [options] [DIR]

  Check that the configuration in DIR (default: the current directory) is
  valid: every file parses, blocks and attributes are known, references
  resolve, values are well-formed, and every secret's hosts are reachable
  under its sandbox's egress policy. It reads no lock file or state and
  touches no network.

Options:

` + varUsage + `  -no-color           Print diagnostics without colour.
`

type validateArgs struct {
	dir     string
	vars    varFlags
	noColor bool
}

func runValidate(_ context.Context, env *Env, args []string) int {
	var a validateArgs
	fs := newFlagSet("validate")
	a.vars.register(fs)
	fs.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, fs, validateUsage, args)
	if !ok {
		return code
	}
	if a.dir, ok = dirArg(env, "validate", pos); !ok {
		return ExitError
	}
	v := newView(env, a.noColor)

	cfg, diags := lang.Load(a.dir, a.vars.options(env))
	v.diagnostics(sources(cfg), diags)
	if diags.HasErrors() {
		return ExitError
	}
	v.println("%s The configuration in %s is valid (%s, %s).", v.bold("Success!"), a.dir,
		plural(len(cfg.Images), "image"), plural(len(cfg.Sandboxes), "sandbox"))
	return ExitOK
}

// sources returns the parsed files of cfg for diagnostic snippets.
func sources(cfg *lang.Config) map[string]*hcl.File {
	if cfg == nil {
		return nil
	}
	return cfg.Sources
}

// plural returns "1 image", "2 images", "3 sandboxes".
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "x"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
