package command

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/internal/agentbridge"
	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/pipeline"
	"github.com/sbx-dev/sbx/internal/procstat"
	"github.com/sbx-dev/sbx/internal/sandbox/sandboxnet"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"golang.org/x/sys/unix"
)

const agentUsage = `
Usage: sbx agent install claude [options] [DIR] [SANDBOX]
       sbx agent hook -dir DIR -sandbox SANDBOX EVENT
       sbx agent exec -dir DIR -sandbox SANDBOX -session ID -b64 COMMAND

  Run the tools of Claude Code, which runs on the host, in a sandbox of
  the configuration in DIR (default: the current directory): one sandbox
  per Claude session, started at the session's first Bash call and
  stopped when the session ends or Claude exits.

  install claude writes the hooks into .claude/settings.json of the
  project directory (default DIR), merged with what the file holds;
  SANDBOX may be left out when the configuration has one sandbox.
  hook is the command those hooks run (Claude Code writes the event's
  JSON to its standard input); exec is what a Bash call becomes: it
  starts the session's sandbox if it is not running and runs COMMAND
  (base64) there with sh -c, as the sandbox's user, streaming its output
  and exiting with its exit code.

  See docs/agents.md ("Claude Code on the host").

Options of install:

  -project DIR        The project whose .claude/settings.json is written.
  -print              Print the hooks' JSON instead of writing the file.
  -force              Install even when the project's own Claude Code
                      files hold hooks, an environment, MCP servers or
                      other settings that run on the host (listed when
                      refused).

  install refuses a sandbox whose read-write mounts let the guest write
  what the host reads as configuration afterwards: Claude Code's
  .claude/, .mcp.json, CLAUDE.md and CLAUDE.local.md in the project, and
  the configuration's *.hcl files and .sbx; make them read-only in the
  mount (the error says how). exec checks the same at every start.
`

func runAgent(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(env.Stdout, strings.TrimLeft(agentUsage, "\n"))
		if len(args) == 0 {
			return ExitError
		}
		return ExitOK
	}
	if strings.HasPrefix(args[0], "-") {
		if err := newFlagSet("agent").Parse(args); err != nil {
			flagError(env, "agent", err)
			return ExitError
		}
	}
	switch args[0] {
	case "install":
		return runAgentInstall(env, args[1:])
	case "hook":
		return runAgentHook(ctx, env, args[1:])
	case "exec":
		return runAgentExec(ctx, env, args[1:])
	}
	usageError(env, "agent", "Unknown agent command", fmt.Sprintf("sbx agent has no command %q: install, hook or exec.", args[0]))
	return ExitError
}

// sbxPath is the absolute path of this executable, which the hooks run.
func sbxPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	return filepath.Abs(exe)
}

func runAgentInstall(env *Env, args []string) int {
	flags := newFlagSet("agent install")
	project := flags.String("project", "", "")
	print := flags.Bool("print", false, "")
	force := flags.Bool("force", false, "")
	pos, code, ok := parseArgs(env, flags, agentUsage, args)
	if !ok {
		return code
	}
	if len(pos) == 0 || pos[0] != "claude" || len(pos) > 3 {
		usageError(env, "agent", "Invalid arguments", "Usage: sbx agent install claude [DIR] [SANDBOX]; only claude can be installed.")
		return ExitError
	}
	dir, name := ".", ""
	if len(pos) > 1 {
		dir = pos[1]
	}
	if len(pos) > 2 {
		name = strings.TrimPrefix(pos[2], "sandbox.")
	}
	v := newView(env, false)
	cfg, ok := loadConfig(v, dir, (&varFlags{}).options(env))
	if !ok {
		return ExitError
	}
	if name == "" {
		names := slices.Sorted(maps.Keys(cfg.Sandboxes))
		if len(names) != 1 {
			v.errorDetail("Name the sandbox", fmt.Sprintf("The configuration has %d sandboxes (%s): say which one runs the tools.", len(names), strings.Join(names, ", ")))
			return ExitError
		}
		name = names[0]
	}
	if _, ok := cfg.Sandboxes[name]; !ok {
		v.errorDetail(fmt.Sprintf("No sandbox %q in the configuration", name), "")
		return ExitError
	}
	exe, err := sbxPath()
	if err != nil {
		v.errorFrom("Cannot find the sbx executable", err, true)
		return ExitError
	}
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		v.errorFrom("Cannot resolve the configuration directory", err, true)
		return ExitError
	}
	r := agentbridge.Route{Sbx: exe, ConfigDir: abs, Sandbox: name}
	if *print {
		b, err := agentbridge.MergeHooks(nil, r)
		if err != nil {
			v.errorFrom("Cannot write the hooks", err, true)
			return ExitError
		}
		fmt.Fprintf(env.Stdout, "{\"hooks\": %s}\n", b)
		return ExitOK
	}
	if *project == "" {
		*project = abs
	}
	projectAbs, err := filepath.Abs(*project)
	if err != nil {
		v.errorFrom("Cannot resolve the project directory", err, true)
		return ExitError
	}
	if err := agentbridge.CheckMounts(abs, []string{projectAbs, abs}, cfg.Sandboxes[name].Policy.Mounts); err != nil {
		v.errorDetail("The sandbox could change the host's configuration", err.Error())
		return ExitError
	}
	if err := agentbridge.CheckProject(projectAbs); err != nil && !*force {
		v.errorDetail("The project's Claude Code settings go around the sandbox", err.Error())
		return ExitError
	}
	path, err := agentbridge.Install(*project, r)
	if err != nil {
		v.errorFrom("Cannot install the hooks", err, true)
		return ExitError
	}
	fmt.Fprintf(env.Stdout, "Claude Code's Bash calls in %s now run in sandbox.%s, one per session (%s).\n", *project, name, path)
	return ExitOK
}

// runAgentHook is the hook command. Whatever goes wrong exits 2 (the
// call is blocked, with the reason on stderr): Claude Code runs a call
// unchanged on the host after any other failure of a hook.
func runAgentHook(ctx context.Context, env *Env, args []string) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(env.Stderr, "sbx: the hook failed: %v\n", p)
			code = 2
		}
	}()
	flags := newFlagSet("agent hook")
	dir := flags.String("dir", "", "")
	name := flags.String("sandbox", "", "")
	pos, _, ok := parseArgs(env, flags, agentUsage, args)
	if !ok || len(pos) != 1 || *dir == "" || *name == "" {
		fmt.Fprintln(env.Stderr, "sbx: usage: sbx agent hook -dir DIR -sandbox SANDBOX EVENT")
		return 2
	}
	in, err := agentbridge.ReadInput(env.Stdin)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sbx: %v\n", err)
		return 2
	}
	exe, err := sbxPath()
	if err != nil {
		fmt.Fprintf(env.Stderr, "sbx: %v\n", err)
		return 2
	}
	r := agentbridge.Route{Sbx: exe, ConfigDir: *dir, Sandbox: *name}
	if in.HookEventName == "SessionEnd" {
		if err := stopSession(ctx, env, r, in.SessionID); err != nil {
			fmt.Fprintf(env.Stderr, "sbx: stopping the session's sandbox: %v\n", err)
			return 1 // SessionEnd cannot block anything
		}
		return 0
	}
	var d agentbridge.Decision
	if agentbridge.IsFileTool(in.ToolName) && (in.HookEventName == "PreToolUse" || in.HookEventName == "PostToolUse") {
		d = decideFile(ctx, env, r, in)
	} else {
		d = agentbridge.Decide(in, r)
	}
	env.Stdout.Write(d.Stdout)
	fmt.Fprint(env.Stderr, d.Stderr)
	return d.Code
}

// sessionDir returns the supervisor directory of session's sandbox.
func sessionDir(env *Env, r agentbridge.Route, session string) (string, error) {
	dir, err := runtimeDir(env, r.ConfigDir, agentbridge.InstanceName(r.Sandbox, session))
	if err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

// stopSession stops and removes session's sandbox, if it has one.
func stopSession(ctx context.Context, env *Env, r agentbridge.Route, session string) error {
	dir, err := sessionDir(env, r, session)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := checkHolder(dir, session); err != nil {
		return err
	}
	return supervisor.Remove(ctx, dir, 0, 0)
}

func runAgentExec(ctx context.Context, env *Env, args []string) int {
	flags := newFlagSet("agent exec")
	dir := flags.String("dir", "", "")
	name := flags.String("sandbox", "", "")
	session := flags.String("session", "", "")
	b64 := flags.String("b64", "", "")
	pos, code, ok := parseArgs(env, flags, agentUsage, args)
	if !ok {
		return code
	}
	if len(pos) != 0 || *dir == "" || *name == "" {
		usageError(env, "agent", "Invalid arguments", "Usage: sbx agent exec -dir DIR -sandbox SANDBOX -session ID -b64 COMMAND")
		return ExitError
	}
	if err := agentbridge.CheckSessionID(*session); err != nil {
		errorDetail(env, "Invalid session", err.Error())
		return ExitError
	}
	cmd, err := base64.StdEncoding.DecodeString(*b64)
	if err != nil {
		errorDetail(env, "Invalid command", "-b64 is not base64: "+err.Error())
		return ExitError
	}
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	r := agentbridge.Route{ConfigDir: *dir, Sandbox: *name}
	sdir, spec, code, ok := ensureSession(ctx, env, r, *session)
	if !ok {
		return code
	}
	c, err := supervisor.Dial(ctx, sdir)
	if err != nil {
		errorFrom(env, "Cannot reach the session's sandbox", err, true)
		return ExitError
	}
	defer c.Close()
	wd, _ := os.Getwd()
	g := guestCommand{verb: "exec", target: "sandbox." + *name}
	return g.run(ctx, env, guestconn.Cmd{Args: agentbridge.ShellArgs(string(cmd)), Env: slices.Clip(spec.Env), Dir: guestDir(spec, wd), User: spec.User}, c.Exec)
}

// guestDir returns the guest directory where host directory wd is
// mounted, or "" (the user's home) when no mount holds it.
func guestDir(spec *supervisor.Spec, wd string) string {
	for _, m := range spec.Mounts {
		rel, err := filepath.Rel(m.HostDir, wd)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(m.Policy.Guest, rel)
	}
	return ""
}

// ensureSession returns the supervisor directory and spec of session's
// sandbox, starting it (as "sbx apply" starts a sandbox: a detached
// supervisor) when it does not run, under a lock so that parallel first
// calls start one. It records the lease on Claude Code's process, so that
// the supervisor stops the sandbox when Claude exits.
func ensureSession(ctx context.Context, env *Env, r agentbridge.Route, session string) (string, *supervisor.Spec, int, bool) {
	dir, err := sessionDir(env, r, session)
	if err != nil {
		errorFrom(env, "Cannot find the session's sandbox directory", err, true)
		return "", nil, ExitError, false
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		errorFrom(env, "Cannot make the session's sandbox directory", err, true)
		return "", nil, ExitError, false
	}
	lf, err := os.OpenFile(filepath.Join(dir, supervisor.LeaseLockFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		errorFrom(env, "Cannot lock the session's sandbox", err, true)
		return "", nil, ExitError, false
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		errorFrom(env, "Cannot lock the session's sandbox", err, true)
		return "", nil, ExitError, false
	}
	if err := checkHolder(dir, session); err != nil {
		errorFrom(env, "Cannot use the session's sandbox", err, true)
		return "", nil, ExitError, false
	}
	if st, err := supervisor.ReadStatus(dir); err == nil && st.State == supervisor.StateRunning {
		if spec, err := supervisor.ReadSpec(dir); err == nil {
			if c, err := supervisor.Dial(ctx, dir); err == nil {
				c.Close()
				lease(env, dir, session)
				return dir, spec, ExitOK, true
			}
		}
	}
	// Not running: start it afresh.
	quiet := *env
	quiet.Stdout = env.Stderr
	v := newView(&quiet, false)
	cfg, sb, ok := loadSandbox(v, r.ConfigDir, (&varFlags{}).options(env), r.Sandbox)
	if !ok {
		return "", nil, ExitError, false
	}
	// Checked at every start, not only at install: the spec may have
	// changed since.
	projects := []string{r.ConfigDir}
	if wd, err := os.Getwd(); err == nil {
		projects = append(projects, wd)
	}
	if err := agentbridge.CheckMounts(r.ConfigDir, projects, sb.Policy.Mounts); err != nil {
		v.errorDetail("The sandbox could change the host's configuration", err.Error())
		return "", nil, ExitError, false
	}
	binds, ok := checkSecrets(v, env, cfg, sb)
	if !ok {
		return "", nil, ExitError, false
	}
	img, ok := lockAndBuild(ctx, &quiet, v, cfg, sb.Image, false)
	if !ok {
		return "", nil, failedOrInterrupted(ctx, env, "no VM was started"), false
	}
	spec, err := pipeline.SandboxSpec(cfg, sb, img)
	if err != nil {
		v.errorFrom("Cannot start the session's sandbox", err, true)
		return "", nil, ExitError, false
	}
	secrets, err := sandboxnet.ResolveSecrets(ctx, sb.Policy, sandboxnet.SecretSources{ConfigDir: cfg.Dir, Bindings: binds, Environ: env.Environ})
	if err != nil {
		v.errorFrom("Cannot read the sandbox's secrets", err, true)
		return "", nil, ExitError, false
	}
	if err := supervisor.Remove(context.WithoutCancel(ctx), dir, 0, 0); err != nil {
		v.errorFrom("Cannot clear the session's sandbox directory", err, true)
		return "", nil, ExitError, false
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		v.errorFrom("Cannot make the session's sandbox directory", err, true)
		return "", nil, ExitError, false
	}
	lease(env, dir, session)
	fmt.Fprintf(env.Stderr, "sbx: starting sandbox.%s for Claude session %s\n", r.Sandbox, session)
	if _, err := supervisor.Spawn(ctx, dir, spec, supervisor.SpawnOptions{Env: env.Environ, Secrets: secrets}); err != nil {
		v.errorDetail("Cannot start the session's sandbox", quoteErr(err))
		return "", nil, ExitError, false
	}
	return dir, &spec, ExitOK, true
}

// checkHolder returns an error when dir's lease is held by another
// session than session (two ids whose hashes share 48 bits) or by
// something else; no lease is none.
func checkHolder(dir, session string) error {
	l, err := supervisor.ReadLease(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if id, ok := agentbridge.HolderSession(l.Holder); !ok || id != session {
		return fmt.Errorf("%s belongs to %q, not to Claude session %s", dir, l.Holder, session)
	}
	return nil
}

// lease records, in the supervisor directory dir, the lease on the
// Claude Code process this command runs under: the first ancestor that
// is not a shell (Claude runs a Bash call as "bash -c …"). A lease that
// cannot be made is reported and not fatal: the sandbox then lives until
// SessionEnd.
func lease(env *Env, dir, session string) {
	pid := claudePid(os.Getppid())
	l, err := supervisor.LeaseOf(pid)
	l.Holder = agentbridge.Holder(session)
	if err == nil {
		err = supervisor.WriteLease(dir, l)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sbx: the sandbox is not leased to process %d (it will be stopped at SessionEnd only): %v\n", pid, err)
	}
}

// claudePid walks up from pid past shells (sh, bash, dash, zsh) and
// returns the first other process: Claude Code.
func claudePid(pid int) int {
	for range 8 {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return pid
		}
		switch strings.TrimSpace(string(comm)) {
		case "sh", "bash", "dash", "zsh":
		default:
			return pid
		}
		st, err := procstat.Read(pid)
		if err != nil || st.PPid <= 1 {
			return pid
		}
		pid = st.PPid
	}
	return pid
}
