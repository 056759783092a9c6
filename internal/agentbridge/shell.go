package agentbridge

// ShellStateDir is the guest directory prefix where a session's shell
// state is kept between Bash calls: the user's uid is appended. It is on
// the guest's own disk, which belongs to one session's sandbox alone;
// the host never reads it.
const ShellStateDir = "/tmp/.sbx-shell-"

// shellWrapper runs the model's command ($1) in a shell that starts
// from the state the previous call left: the exported variables
// (export -p) and the working directory, read from the state directory
// at the start and written back, each to a temporary file renamed over
// the old one, when the shell exits (the EXIT trap keeps the command's
// exit status). Parallel calls each start from the last state saved and
// the last to end wins. A background process started by the command is
// left running: the call's process group is signalled only when the
// call is cancelled. A state directory that is a symbolic link, or that
// cannot be made, turns the state off for the call; the command still
// runs.
const shellWrapper = `__sbx_s=` + ShellStateDir + `$(id -u)
if [ ! -L "$__sbx_s" ] && mkdir -p -m 700 "$__sbx_s" 2>/dev/null && [ -d "$__sbx_s" ] && [ ! -L "$__sbx_s" ]; then
  if [ -f "$__sbx_s/env" ]; then . "$__sbx_s/env"; fi
  if [ -f "$__sbx_s/cwd" ]; then IFS= read -r __sbx_d < "$__sbx_s/cwd"; cd "$__sbx_d" 2>/dev/null; unset __sbx_d; fi
  trap '__sbx_rc=$?; export -p > "$__sbx_s/env.$$" && mv -f "$__sbx_s/env.$$" "$__sbx_s/env"; pwd > "$__sbx_s/cwd.$$" && mv -f "$__sbx_s/cwd.$$" "$__sbx_s/cwd"; exit $__sbx_rc' EXIT
fi
eval "$1"
`

// ShellArgs is the guest command line that runs cmd, a Bash call's
// command, with the session's shell state: /bin/sh -c with the wrapper,
// cmd its first argument (never spliced into the wrapper's text).
func ShellArgs(cmd string) []string {
	return []string{"/bin/sh", "-c", shellWrapper, "sbx-shell", cmd}
}
