package command

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// Exit codes returned by Run.
const (
	// ExitOK: success; for plan -detailed-exitcode, no changes.
	ExitOK = 0
	// ExitError: an error was reported, or plan -fail-on-widen found a
	// widening change.
	ExitError = 1
	// ExitChanges: plan -detailed-exitcode found changes.
	ExitChanges = 2
	// ExitUnformatted: fmt -check found files that need formatting.
	ExitUnformatted = 3
	// ExitInterrupted: interrupted (Ctrl-C, SIGTERM), as shells report
	// a process killed by SIGINT.
	ExitInterrupted = 130
)

// Env is what a command runs with: its streams and environment, and the
// network clients it fetches with. The zero value of each optional field
// means the process default.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Environ is the environment as os.Environ returns it. It supplies
	// SBX_VAR_name variables and NO_COLOR, and is the environment npm and
	// apt configuration is read from.
	Environ []string
	// HTTPClient fetches npm packages, https URLs and, through its
	// transport, OCI registries. Nil means a default client.
	HTTPClient *http.Client
	// Keychain authenticates to OCI registries; nil means the docker
	// and podman credential stores.
	Keychain authn.Keychain
	// Context, if set, bounds every command; nil means one cancelled on
	// interrupt.
	Context context.Context
}

func (e *Env) getenv(name string) (string, bool) { return hostenv.Lookup(e.Environ, name) }

// pipeline is what the lock → build → start path reads from env.
func (e *Env) pipeline() pipeline.Env {
	return pipeline.Env{Environ: e.Environ, HTTPClient: e.HTTPClient, Keychain: e.Keychain, Logger: logger(e)}
}

// verb is one sbx subcommand.
type verb struct {
	name     string
	synopsis string
	usage    string
	run      func(ctx context.Context, env *Env, args []string) int
}

func verbs() []verb {
	return []verb{
		{"validate", "Check that a configuration is valid", validateUsage, runValidate},
		{"fmt", "Rewrite spec files in the canonical format", fmtUsage, runFmt},
		{"lock", "Pin every input into sbx.lock.hcl", lockUsage, runLock},
		{"plan", "Show what would change, and whether policy widens", planUsage, runPlan},
		{"build", "Build images reproducibly into the cache", buildUsage, runBuild},
		{"push", "Publish a built image to an OCI registry", pushUsage, runPush},
		{"pull", "Fetch an image the lock file records from an OCI registry", pullUsage, runPull},
		{"run", "Boot a sandbox, run one command in it, tear it down", runUsage, runRun},
		{"node", "Run this host as a Kubernetes node of sandboxes", nodeUsage, runNode},
		{"eval", "Run one command in N fresh sandboxes, keep each run's changes", evalUsage, runEval},
		{"apply", "Build images and start, replace or stop sandboxes", applyUsage, runApply},
		{"exec", "Run a command in a running sandbox", execUsage, runExec},
		{"agent", "Run Claude Code's tools in a sandbox per session", agentUsage, runAgent},
		{"cp", "Copy a file into or out of a running sandbox", cpUsage, runCp},
		{"ps", "List the sandboxes of a configuration and whether they run", psUsage, runPs},
		{"status", "Show one sandbox's state, or list them as ps does", statusUsage, runStatus},
		{"logs", "Show a sandbox's console and supervisor logs", logsUsage, runLogs},
		{"destroy", "Stop sandboxes and remove them from the state", destroyUsage, runDestroy},
		{"output", "Show the output values the last apply recorded", outputUsage, runOutput},
		{"show", "Show a saved plan, the lock file or the state", showUsage, runShow},
		{"doctor", "Check that this machine can build and run sandboxes", doctorUsage, runDoctor},
		{"cache", "List or prune the machines saved for warm starts", cacheUsage, runCache},
		{"version", "Print the sbx version", versionUsage, runVersion},
		{"completion", "Print a shell completion script (bash, zsh, fish)", completionUsage, runCompletion},
		{"help", "Show help for a command", helpUsage, nil},
	}
}

func lookupVerb(name string) (verb, bool) {
	for _, v := range verbs() {
		if v.name == name {
			return v, true
		}
	}
	return verb{}, false
}

// Run runs the sbx command line args (without the program name) and
// returns the process exit code. It never panics: an unexpected failure is
// reported on Stderr as an internal error with exit code 1.
func Run(args []string, env *Env) (code int) {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	defer func() {
		if r := recover(); r != nil {
			errorDetail(env, "Internal error", fmt.Sprintf("%v\nThis is a bug in sbx. Please report it with the command that was run.", r))
			if _, ok := env.getenv("SBX_TRACEBACK"); ok {
				env.Stderr.Write(debug.Stack())
			}
			code = ExitError
		}
	}()

	ctx := env.Context
	if ctx == nil {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
	}

	if len(args) == 0 {
		printMainUsage(env.Stderr)
		return ExitError
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		printMainUsage(env.Stdout)
		return ExitOK
	case "-v", "-version", "--version":
		return runVersion(ctx, env, nil)
	case "help":
		return runHelp(env, rest)
	case supervisor.Verb: // hidden: the process supervisor.Spawn starts
		return runSupervise(ctx, env, rest)
	case completeVerb: // hidden: what completion scripts call
		return runComplete(ctx, env, rest)
	}
	v, ok := lookupVerb(name)
	if !ok {
		unknownVerb(env, "sbx", name)
		return ExitError
	}
	return v.run(ctx, env, rest)
}

func runHelp(env *Env, args []string) int {
	if len(args) == 0 {
		printMainUsage(env.Stdout)
		return ExitOK
	}
	v, ok := lookupVerb(args[0])
	if !ok {
		unknownVerb(env, "sbx help", args[0])
		return ExitError
	}
	fmt.Fprint(env.Stdout, strings.TrimLeft(v.usage, "\n"))
	return ExitOK
}

func printMainUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: sbx COMMAND [options] [args]

sbx compiles declarative sandbox specs (*.hcl): images, egress allowlists,
brokered secrets, host directory mounts and sandboxes.

Commands:
`)
	for _, v := range verbs() {
		fmt.Fprintf(w, "  %-11s %s\n", v.name, v.synopsis)
	}
	fmt.Fprint(w, `
Run "sbx help COMMAND" or "sbx COMMAND -h" for a command's options.
`)
}

const helpUsage = `
Usage: sbx help [COMMAND]

  Show the list of commands, or the options of one command.
`
