package command

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors walks every verb's usage errors: each bad invocation
// must print one "Error:" diagnostic on stderr and nothing on stdout,
// name what is wrong in the summary, point at the verb's help, and exit
// with the code it always had. Every verb is also given an option it does
// not have (package flag's error).
func TestUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "config")
	type usageCase struct {
		args    []string
		code    int
		summary string // the line after "Error: "
		detail  string // a part of the detail
	}
	cases := []usageCase{
		{[]string{"apply", "-parallelism", "0", dir}, ExitError, "Invalid -parallelism", "-parallelism must be at least 1, got 0."},
		{[]string{"apply", "-parallelism", "x", dir}, ExitError, "Invalid -parallelism", `invalid value "x" for flag -parallelism`},
		{[]string{"apply", "a", "b"}, ExitError, "Invalid arguments", "at most one directory; got 2 arguments: a b"},
		{[]string{"apply", "-auto-approve=maybe"}, ExitError, "Invalid -auto-approve", `invalid boolean value "maybe"`},
		{[]string{"plan", "-out"}, ExitError, "Missing value for -out", "flag needs an argument: -out"},
		{[]string{"plan", "a", "b"}, ExitError, "Invalid arguments", "at most one directory"},
		{[]string{"validate", "a", "b"}, ExitError, "Invalid arguments", "at most one directory"},
		{[]string{"doctor", "a", "b"}, ExitError, "Invalid arguments", "at most one directory"},
		{[]string{"lock", "-upgrade", "-lockfile=readonly", dir}, ExitError, "Conflicting options", "-upgrade and -lockfile=readonly"},
		{[]string{"lock", "-lockfile=sloppy", dir}, ExitError, "Invalid -lockfile", "the only mode is readonly"},
		{[]string{"build", "-format", "tar", dir}, ExitError, "Invalid -format", `Unknown -format "tar"`},
		{[]string{"build", "-format", "gondolin", dir}, ExitError, "Missing -o", "needs -o DIR"},
		{[]string{"build", "-format", "gondolin", "-o", tmp, "-verify", dir}, ExitError, "Conflicting options", "-verify"},
		{[]string{"completion"}, ExitError, "Invalid arguments", "bash, zsh or fish"},
		{[]string{"completion", "tcsh"}, ExitError, "Unknown shell", `"tcsh"`},
		{[]string{"cp", "a"}, ExitError, "Invalid arguments", `[DIR] SRC DST, one of them SANDBOX:PATH; got "a"`},
		{[]string{"cp", "-chown", "root", "a", "box:/x"}, ExitError, "Invalid -chown", `-chown "root": write a numeric UID[:GID]`},
		{[]string{"cp", "a:/x", "b:/y"}, ExitError, "Invalid arguments", "Both paths are in a sandbox"},
		{[]string{"cp", "a", "b"}, ExitError, "Invalid arguments", "Neither path is in a sandbox"},
		{[]string{"cp", "-chown", "1", "box:/x", "a"}, ExitError, "Invalid -chown", "into a sandbox"},
		{[]string{"cp", "a", "box:rel"}, ExitError, "Invalid arguments", "box:rel: the path in the sandbox must be absolute"},
		{[]string{"destroy", "-orphans", "-auto-approve"}, ExitError, "Missing directory", "-orphans needs the configuration's directory"},
		{[]string{"eval", dir, "box", "--", "true"}, ExitError, "Missing -results", "-results DIR"},
		{[]string{"eval", "-n", "x", "box"}, ExitError, "Invalid -n", `invalid value "x" for flag -n`},
		{[]string{"exec"}, ExitError, "Invalid arguments", "sbx exec [DIR] SANDBOX -- COMMAND"},
		{[]string{"exec", "a", "b", "c", "--", "true"}, ExitError, "Invalid arguments", "[DIR] SANDBOX before --; got a b c"},
		{[]string{"exec", "./x", "box", "ls"}, ExitError, "Invalid sandbox name", "Without --"},
		{[]string{"exec", "./x", "--", "ls"}, ExitError, "Invalid sandbox name", "Usage: sbx exec"},
		{[]string{"exec", "box"}, ExitError, "Missing command", "No command to run in box"},
		{[]string{"exec", "-e", "=x", "box", "--", "true"}, ExitError, "Invalid -e", "-e "},
		{[]string{"exec", "-timeout", "soon", "box", "--", "true"}, ExitError, "Invalid -timeout", "-timeout"},
		{[]string{"run", "box"}, ExitError, "Missing command", "No command to run in box"},
		{[]string{"logs"}, ExitError, "Invalid arguments", "[DIR] SANDBOX"},
		{[]string{"logs", "-console", "-supervisor", "box"}, ExitError, "Conflicting options", "not both"},
		{[]string{"logs", "-egress", "-console", "box"}, ExitError, "Conflicting options", "-egress"},
		{[]string{"logs", "-json", "box"}, ExitError, "Invalid -json", "-json goes with -egress"},
		{[]string{"logs", "-f", "box"}, ExitError, "Invalid -f", "-f follows one log"},
		{[]string{"output", dir, "a", "b"}, ExitError, "Invalid arguments", "[DIR] [NAME]"},
		{[]string{"output", "-raw"}, ExitError, "Invalid -raw", "name it"},
		{[]string{"ps", "-a", dir}, ExitError, "Invalid arguments", "-a lists every configuration's sandboxes"},
		{[]string{"status", dir, "a", "b"}, ExitError, "Invalid arguments", "[DIR] [SANDBOX]"},
		{[]string{"show", "a", "b"}, ExitError, "Invalid arguments", "at most one file; got 2 arguments: a b"},
		{[]string{"version", "x"}, ExitError, "Invalid arguments", `no arguments; got "x"`},
		{[]string{"cache", "drop"}, ExitError, "Invalid arguments", `list or prune, and no more arguments; got drop`},
	}
	for _, v := range verbs() {
		if v.run == nil { // help
			continue
		}
		cases = append(cases, usageCase{[]string{v.name, "-bogus"}, ExitError, "Unknown option -bogus", "flag provided but not defined: -bogus"})
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.args[0]] = true
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background(),
				Environ: []string{"HOME=" + tmp, "XDG_RUNTIME_DIR=" + tmp, "XDG_CACHE_HOME=" + tmp}}
			code := Run(tc.args, env)
			errOut := stderr.String()
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout is not empty:\n%s", stdout.String())
			}
			checkUsageError(t, errOut, tc.args[0], tc.summary, tc.detail)
		})
	}
	for _, v := range verbs() {
		if v.run != nil && !covered[v.name] {
			t.Errorf("sbx %s has no usage error in the table", v.name)
		}
	}
}

// checkUsageError checks that stderr is one error diagnostic about a
// usage error of verb: "Error: summary", a detail holding detail, and
// the hint to the verb's help as its last line.
func checkUsageError(t *testing.T, stderr, verb, summary, detail string) {
	t.Helper()
	if n := strings.Count(stderr, "Error:"); n != 1 {
		t.Errorf("%d \"Error:\" blocks, want 1:\n%s", n, stderr)
	}
	if want := "Error: " + summary + "\n\n"; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr does not start with %q:\n%s", want, stderr)
	}
	if !strings.Contains(stderr, detail) {
		t.Errorf("stderr lacks %q:\n%s", detail, stderr)
	}
	if want := fmt.Sprintf("\n%s\n\n", usageHint(verb)); !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr does not end with %q:\n%s", want, stderr)
	}
	if strings.HasPrefix(stderr, "sbx ") || strings.Contains(stderr, "\nsbx "+verb+": ") {
		t.Errorf("stderr has a line in the old \"sbx %s: \" form:\n%s", verb, stderr)
	}
}

// TestUnknownCommandIsOneError: a command sbx does not have is one error
// diagnostic, then the list of commands, on stderr.
func TestUnknownCommandIsOneError(t *testing.T) {
	for _, args := range [][]string{{"aply"}, {"help", "aply"}} {
		var stdout, stderr bytes.Buffer
		code := Run(args, &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()})
		errOut := stderr.String()
		if code != ExitError || stdout.Len() > 0 {
			t.Errorf("%q: exit %d, stdout %q", args, code, stdout.String())
		}
		if want := "Error: Unknown command \"aply\"\n\n"; !strings.HasPrefix(errOut, want) || strings.Count(errOut, "Error:") != 1 {
			t.Errorf("%q: stderr does not start with %q alone:\n%s", args, want, errOut)
		}
		if !strings.Contains(errOut, `Did you mean "apply"?`) || !strings.Contains(errOut, "Commands:") {
			t.Errorf("%q: no suggestion or no list of commands:\n%s", args, errOut)
		}
	}
}

func TestFlagSummary(t *testing.T) {
	for msg, want := range map[string]string{
		"flag provided but not defined: -x":                      "Unknown option -x",
		"flag needs an argument: -out":                           "Missing value for -out",
		`invalid value "x" for flag -parallelism: parse error`:   "Invalid -parallelism",
		`invalid boolean value "maybe" for -auto-approve: parse`: "Invalid -auto-approve",
		"bad flag syntax: ---x":                                  "Invalid option",
	} {
		if got := flagSummary(fmt.Errorf("%s", msg)); got != want {
			t.Errorf("flagSummary(%q) = %q, want %q", msg, got, want)
		}
	}
}
