package command

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

const versionUsage = `
Usage: sbx version

  Print the sbx version, the source revision it was built from (when
  known) and the Go toolchain and platform.
`

func runVersion(_ context.Context, env *Env, args []string) int {
	flags := newFlagSet("version")
	pos, code, ok := parseArgs(env, flags, versionUsage, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		usageError(env, "version", "Invalid arguments", fmt.Sprintf("sbx version takes no arguments; got %q.", pos[0]))
		return ExitError
	}
	version, revision, modified := "(devel)", "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	fmt.Fprintf(env.Stdout, "sbx %s\n", version)
	if revision != "" {
		if modified {
			revision += " (modified)"
		}
		fmt.Fprintf(env.Stdout, "revision %s\n", revision)
	}
	fmt.Fprintf(env.Stdout, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return ExitOK
}
