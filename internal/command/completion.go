package command

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
)

const completionUsage = `
Usage: sbx completion bash|zsh|fish

  Print a script that makes the shell complete sbx's commands, each
  command's options, and the names of the sandboxes of the configuration
  in the current directory (or the DIR written before them). The names
  come from the configuration's *.hcl files and its state
  (.sbx/state.json), read by "sbx __complete sandboxes [DIR]", which
  writes nothing and reaches no network; "sbx output" completes the
  outputs the state records ("sbx __complete outputs [DIR]").

  Install it for the current shell:

    bash:  source <(sbx completion bash)
    zsh:   source <(sbx completion zsh)      (after compinit)
    fish:  sbx completion fish | source

  or for every new shell:

    bash:  sbx completion bash > ~/.local/share/bash-completion/completions/sbx
    zsh:   sbx completion zsh > "${fpath[1]}/_sbx"
    fish:  sbx completion fish > ~/.config/fish/completions/sbx.fish
`

// completeVerb is the hidden verb the completion scripts call for
// sandbox names.
const completeVerb = "__complete"

func runCompletion(_ context.Context, env *Env, args []string) int {
	flags := newFlagSet("completion")
	pos, code, ok := parseArgs(env, flags, completionUsage, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		usageError(env, "completion", "Invalid arguments", fmt.Sprintf("Name one shell: bash, zsh or fish; got %d arguments.", len(pos)))
		return ExitError
	}
	spec := completionSpec()
	switch pos[0] {
	case "bash":
		writeBashCompletion(env.Stdout, spec)
	case "zsh":
		writeZshCompletion(env.Stdout, spec)
	case "fish":
		writeFishCompletion(env.Stdout, spec)
	default:
		usageError(env, "completion", "Unknown shell", fmt.Sprintf("No completion for the shell %q; sbx has them for bash, zsh and fish.", pos[0]))
		return ExitError
	}
	return ExitOK
}

// runComplete is the hidden "sbx __complete sandboxes [DIR]": it prints
// the names of the sandboxes the configuration in DIR (default: the
// current directory) declares or its state records, one a line, sorted.
// It loads the configuration with the environment's variables, reads the
// state without its lock, writes nothing and prints no error: what cannot
// be read gives no names, and standard output holds names only.
// "sbx __complete outputs [DIR]" prints the names of the outputs the
// state records in the same way.
func runComplete(_ context.Context, env *Env, args []string) int {
	if len(args) == 0 || (args[0] != "sandboxes" && args[0] != "outputs") || len(args) > 2 {
		return ExitError
	}
	dir := "."
	if len(args) == 2 {
		dir = args[1]
	}
	names := map[string]bool{}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ExitOK
	}
	if args[0] == "outputs" {
		if st, err := state.Load(dir); err == nil {
			for name := range st.Outputs {
				names[name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			fmt.Fprintln(env.Stdout, name)
		}
		return ExitOK
	}
	cfg, _ := lang.Load(dir, lang.Options{Environ: env.Environ})
	for name := range cfg.Sandboxes {
		names[name] = true
	}
	if st, err := state.Load(dir); err == nil {
		for _, r := range st.Resources {
			if r.Sandbox != nil {
				names[r.Addr.Name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		fmt.Fprintln(env.Stdout, name)
	}
	return ExitOK
}

// verbArgs says what a verb's positional arguments are, for completion.
type verbArgs int

const (
	argsFiles     verbArgs = iota // paths: [DIR], [FILE|DIR], [TARGET...]
	argsSandbox                   // [DIR] SANDBOX, then a command after "--"
	argsSandboxes                 // [DIR] [SANDBOX...]
	argsGuestPath                 // [DIR] SANDBOX:PATH HOSTPATH, or the reverse
	argsVerb                      // COMMAND (sbx help)
	argsShell                     // bash|zsh|fish (sbx completion)
	argsNone                      // none
	argsOutput                    // [DIR] [NAME] (sbx output)
)

// completedArgs are the verbs whose arguments are not paths. A test
// checks it against each verb's usage line.
var completedArgs = map[string]verbArgs{
	"run":        argsSandbox,
	"eval":       argsSandbox,
	"exec":       argsSandbox,
	"agent":      argsSandbox,
	"logs":       argsSandbox,
	"status":     argsSandbox,
	"destroy":    argsSandboxes,
	"output":     argsOutput,
	"cp":         argsGuestPath,
	"help":       argsVerb,
	"completion": argsShell,
	"version":    argsNone,
	"cache":      argsNone,
}

// verbCompletion is what the scripts know of one verb.
type verbCompletion struct {
	name, synopsis string
	flags          []usageFlag
	args           verbArgs
}

// usageFlag is an option as a verb's usage lists it.
type usageFlag struct {
	name  string // without the dash
	value bool   // it takes a value ("-out FILE", "-lock-timeout=D")
}

// completionSpec returns every visible verb with the options its usage
// lists: the usage is what "sbx VERB -h" prints, and a test checks that
// each option it lists is one the verb's flag set accepts.
func completionSpec() []verbCompletion {
	var out []verbCompletion
	for _, v := range verbs() {
		out = append(out, verbCompletion{name: v.name, synopsis: v.synopsis, flags: usageFlags(v.usage), args: completedArgs[v.name]})
	}
	return out
}

// usageFlags reads the options from the "Options:" section of a usage
// text: the lines indented by two spaces that start with "-". A flag
// written with a value ("-u USER", "-out FILE", "-lock-timeout=D") takes
// one, unless the value is true or false ("-write=false").
func usageFlags(usage string) []usageFlag {
	_, opts, ok := strings.Cut(usage, "\nOptions:\n")
	if !ok {
		return nil
	}
	var out []usageFlag
	seen := map[string]bool{}
	for line := range strings.SplitSeq(opts, "\n") {
		rest, ok := strings.CutPrefix(line, "  -")
		if !ok || rest == "" || rest[0] == ' ' || rest[0] == '-' {
			continue
		}
		end := strings.IndexAny(rest, " =")
		if end < 0 {
			end = len(rest)
		}
		f := usageFlag{name: rest[:end]}
		if after := rest[end:]; strings.HasPrefix(after, "=") {
			v, _, _ := strings.Cut(after[1:], " ")
			f.value = v != "true" && v != "false"
		} else if v := strings.TrimLeft(after, " "); v != "" && strings.Index(after, v) == 1 {
			// One space, then a value in capitals: "-u USER".
			w, _, _ := strings.Cut(v, " ")
			f.value = strings.ToUpper(w) == w && strings.ContainsAny(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
		}
		if !seen[f.name] {
			seen[f.name] = true
			out = append(out, f)
		}
	}
	return out
}

// flagNames returns the flags with their dash, those taking a value only
// when value is set.
func flagNames(flags []usageFlag, valueOnly bool) string {
	var names []string
	for _, f := range flags {
		if !valueOnly || f.value {
			names = append(names, "-"+f.name)
		}
	}
	return strings.Join(names, " ")
}

// verbsOf returns the names of the verbs whose arguments are kind.
func verbsOf(spec []verbCompletion, kind verbArgs) []string {
	var names []string
	for _, v := range spec {
		if v.args == kind {
			names = append(names, v.name)
		}
	}
	return names
}

func writeBashCompletion(w io.Writer, spec []verbCompletion) {
	var names []string
	for _, v := range spec {
		names = append(names, v.name)
	}
	fmt.Fprintf(w, `# bash completion for sbx; "sbx completion -h" says how to install it.

_sbx_flags() {
    case $1 in
`)
	for _, v := range spec {
		if len(v.flags) > 0 {
			fmt.Fprintf(w, "        %s) echo %q ;;\n", v.name, flagNames(v.flags, false))
		}
	}
	fmt.Fprintf(w, `    esac
}

_sbx_value_flags() {
    case $1 in
`)
	for _, v := range spec {
		if s := flagNames(v.flags, true); s != "" {
			fmt.Fprintf(w, "        %s) echo %q ;;\n", v.name, s)
		}
	}
	fmt.Fprintf(w, `    esac
}

# _sbx_sandboxes DIR prints the sandboxes of the configuration in DIR.
_sbx_sandboxes() {
    "${COMP_WORDS[0]}" %[1]s sandboxes "$1" 2>/dev/null
}

# _sbx_outputs DIR prints the outputs the state of DIR records.
_sbx_outputs() {
    "${COMP_WORDS[0]}" %[1]s outputs "$1" 2>/dev/null
}

# _sbx_dirs PREFIX prints the directories that start with PREFIX, hidden
# ones only when PREFIX starts with a dot.
_sbx_dirs() {
    if [[ $1 == .* ]]; then
        compgen -d -- "$1"
    else
        compgen -d -X '.*' -- "$1"
    fi
}

_sbx() {
    local cur=${COMP_WORDS[COMP_CWORD]} verb= w i skip=0 dashes=0 after=0 dir=.
    local -a pos=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ -z $verb ]]; then
            [[ $w == -* ]] || verb=$w
            continue
        fi
        if ((dashes)); then
            ((after++))
            continue
        fi
        # bash splits "-flag=value" into "-flag", "=" and "value".
        if [[ $w == = ]]; then
            skip=1
            continue
        fi
        if ((skip)); then
            skip=0
            continue
        fi
        case $w in
        --) dashes=1 ;;
        -*) [[ " $(_sbx_value_flags "$verb") " == *" $w "* ]] && skip=1 ;;
        *) pos+=("$w") ;;
        esac
    done
    COMPREPLY=()
    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W %[2]q -- "$cur"))
        return
    fi
    if ((dashes)); then
        ((after == 0)) && COMPREPLY=($(compgen -c -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_sbx_flags "$verb")" -- "$cur"))
        return
    fi
    if ((${#pos[@]} > 0)) && [[ -d ${pos[0]} ]]; then
        dir=${pos[0]}
        pos=("${pos[@]:1}")
    fi
    case $verb in
    %[3]s)
        if ((${#pos[@]} == 0)); then
            COMPREPLY=($(compgen -W "$(_sbx_sandboxes "$dir")" -- "$cur"))
            [[ $dir == . ]] && COMPREPLY+=($(_sbx_dirs "$cur"))
        fi
        ;;
    %[4]s)
        COMPREPLY=($(compgen -W "$(_sbx_sandboxes "$dir")" -- "$cur"))
        [[ $dir == . && ${#pos[@]} == 0 ]] && COMPREPLY+=($(_sbx_dirs "$cur"))
        ;;
    %[5]s)
        if ((${#pos[@]} < 2)); then
            compopt -o nospace 2>/dev/null
            COMPREPLY=($(compgen -W "$(_sbx_sandboxes "$dir" | sed 's/$/:/')" -- "$cur"))
            COMPREPLY+=($(compgen -f -- "$cur"))
        fi
        ;;
    %[6]s)
        COMPREPLY=($(compgen -W %[2]q -- "$cur"))
        ;;
    %[7]s)
        COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
        ;;
    %[8]s)
        if ((${#pos[@]} == 0)); then
            COMPREPLY=($(compgen -W "$(_sbx_outputs "$dir")" -- "$cur"))
            [[ $dir == . ]] && COMPREPLY+=($(_sbx_dirs "$cur"))
        fi
        ;;
    esac
}

complete -o default -F _sbx sbx
`, completeVerb, strings.Join(names, " "),
		bashCase(verbsOf(spec, argsSandbox)), bashCase(verbsOf(spec, argsSandboxes)), bashCase(verbsOf(spec, argsGuestPath)),
		bashCase(verbsOf(spec, argsVerb)), bashCase(verbsOf(spec, argsShell)), bashCase(verbsOf(spec, argsOutput)))
}

// bashCase is a case pattern matching names; one that matches nothing
// when there are none.
func bashCase(names []string) string {
	if len(names) == 0 {
		return "__none__"
	}
	return strings.Join(names, "|")
}

func writeZshCompletion(w io.Writer, spec []verbCompletion) {
	fmt.Fprintf(w, `#compdef sbx
# zsh completion for sbx; "sbx completion -h" says how to install it.

_sbx_flags() {
  case $1 in
`)
	for _, v := range spec {
		if len(v.flags) > 0 {
			fmt.Fprintf(w, "    %s) print -r -- %q ;;\n", v.name, flagNames(v.flags, false))
		}
	}
	fmt.Fprintf(w, `  esac
}

_sbx_value_flags() {
  case $1 in
`)
	for _, v := range spec {
		if s := flagNames(v.flags, true); s != "" {
			fmt.Fprintf(w, "    %s) print -r -- %q ;;\n", v.name, s)
		}
	}
	fmt.Fprintf(w, `  esac
}

# _sbx_sandboxes DIR prints the sandboxes of the configuration in DIR.
_sbx_sandboxes() {
  ${words[1]} %[1]s sandboxes "$1" 2>/dev/null
}

# _sbx_outputs DIR prints the outputs the state of DIR records.
_sbx_outputs() {
  ${words[1]} %[1]s outputs "$1" 2>/dev/null
}

_sbx() {
  local -a verbs pos names
  local verb= w i skip=0 dashes=0 after=0 dir=.
  verbs=(
`, completeVerb)
	for _, v := range spec {
		fmt.Fprintf(w, "    %s\n", zshQuote(v.name+":"+v.synopsis))
	}
	fmt.Fprintf(w, `  )
  for (( i = 2; i < CURRENT; i++ )); do
    w=${words[i]}
    if [[ -z $verb ]]; then
      [[ $w == -* ]] || verb=$w
      continue
    fi
    if (( dashes )); then
      (( after++ ))
      continue
    fi
    if (( skip )); then
      skip=0
      continue
    fi
    case $w in
      --) dashes=1 ;;
      -*=*) ;;
      -*) [[ " $(_sbx_value_flags $verb) " == *" $w "* ]] && skip=1 ;;
      *) pos+=("$w") ;;
    esac
  done
  if [[ -z $verb ]]; then
    _describe -t commands 'sbx command' verbs
    return
  fi
  if (( dashes )); then
    if (( after == 0 )); then
      _command_names -e
    else
      _files
    fi
    return
  fi
  if [[ $PREFIX == -* ]]; then
    compadd -- ${=$(_sbx_flags $verb)}
    return
  fi
  if (( ${#pos} > 0 )) && [[ -d ${pos[1]} ]]; then
    dir=${pos[1]}
    shift pos
  fi
  names=(${(f)"$(_sbx_sandboxes $dir)"})
  case $verb in
    %[1]s)
      if (( ${#pos} == 0 )); then
        compadd -- $names
        [[ $dir == . ]] && _files -/
      fi
      ;;
    %[2]s)
      compadd -- $names
      [[ $dir == . && ${#pos} == 0 ]] && _files -/
      ;;
    %[3]s)
      if (( ${#pos} < 2 )); then
        compadd -S : -- $names
        _files
      fi
      ;;
    %[4]s)
      _describe -t commands 'sbx command' verbs
      ;;
    %[5]s)
      compadd -- bash zsh fish
      ;;
    %[6]s)
      if (( ${#pos} == 0 )); then
        compadd -- ${(f)"$(_sbx_outputs $dir)"}
        [[ $dir == . ]] && _files -/
      fi
      ;;
    *)
      _files
      ;;
  esac
}

if [[ $funcstack[1] == _sbx ]]; then
  _sbx "$@"
else
  compdef _sbx sbx
fi
`, bashCase(verbsOf(spec, argsSandbox)), bashCase(verbsOf(spec, argsSandboxes)), bashCase(verbsOf(spec, argsGuestPath)),
		bashCase(verbsOf(spec, argsVerb)), bashCase(verbsOf(spec, argsShell)), bashCase(verbsOf(spec, argsOutput)))
}

// zshQuote quotes s in single quotes for zsh.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote quotes s in single quotes for fish, where a backslash escapes
// a quote or a backslash inside them.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func writeFishCompletion(w io.Writer, spec []verbCompletion) {
	var names []string
	for _, v := range spec {
		names = append(names, v.name)
	}
	fmt.Fprintf(w, `# fish completion for sbx; "sbx completion -h" says how to install it.

# __sbx_dir prints the configuration directory of the command line: the
# first argument after the command when it is a directory, else ".".
function __sbx_dir
    set -l args (commandline -opc)
    for a in $args[3..-1]
        string match -q -- '-*' $a; and continue
        if test -d $a
            echo $a
            return
        end
        break
    end
    echo .
end

function __sbx_sandboxes
    set -l args (commandline -opc)
    $args[1] %[1]s sandboxes (__sbx_dir) 2>/dev/null
end

function __sbx_outputs
    set -l args (commandline -opc)
    $args[1] %[1]s outputs (__sbx_dir) 2>/dev/null
end

# __sbx_guest_paths prints SANDBOX: for each sandbox, for sbx cp.
function __sbx_guest_paths
    for name in (__sbx_sandboxes)
        echo $name:
    end
end

# __sbx_before_dashes is true until "--" ends sbx's own arguments.
function __sbx_before_dashes
    not contains -- -- (commandline -opc)
end

complete -c sbx -n __fish_use_subcommand -f
`, completeVerb)
	for _, v := range spec {
		fmt.Fprintf(w, "complete -c sbx -n __fish_use_subcommand -a %s -d %s\n", v.name, fishQuote(v.synopsis))
	}
	for _, v := range spec {
		for _, f := range v.flags {
			req := ""
			if f.value {
				req = " -r"
			}
			fmt.Fprintf(w, "complete -c sbx -n '__fish_seen_subcommand_from %s; and __sbx_before_dashes' -o %s%s\n", v.name, f.name, req)
		}
	}
	fmt.Fprintf(w, `complete -c sbx -n '__fish_seen_subcommand_from %[1]s; and __sbx_before_dashes' -a '(__sbx_sandboxes)' -d sandbox
complete -c sbx -n '__fish_seen_subcommand_from %[2]s' -a '(__sbx_guest_paths)' -d sandbox
complete -c sbx -n '__fish_seen_subcommand_from %[3]s' -f -a %[4]s
complete -c sbx -n '__fish_seen_subcommand_from %[5]s' -f -a 'bash zsh fish'
complete -c sbx -n '__fish_seen_subcommand_from %[6]s' -a '(__sbx_outputs)' -d output
`, strings.Join(append(verbsOf(spec, argsSandbox), verbsOf(spec, argsSandboxes)...), " "),
		strings.Join(verbsOf(spec, argsGuestPath), " "), strings.Join(verbsOf(spec, argsVerb), " "),
		fishQuote(strings.Join(names, " ")), strings.Join(verbsOf(spec, argsShell), " "), strings.Join(verbsOf(spec, argsOutput), " "))
}
