package command

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/state"
)

// TestUsageFlagsAreFlags checks that every option a verb's usage lists,
// which the completion scripts offer, is one its flag set defines, and
// that the usage is read as it is meant.
func TestUsageFlagsAreFlags(t *testing.T) {
	spec := completionSpec()
	byVerb := map[string]verbCompletion{}
	for _, v := range spec {
		byVerb[v.name] = v
		for _, f := range v.flags {
			// -FLAG=x is parsed (or rejected as a bad value) before -h
			// stops the verb; an undefined flag is an error of its own.
			var stdout, stderr bytes.Buffer
			Run([]string{v.name, "-" + f.name + "=x", "-h"}, &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()})
			if strings.Contains(stderr.String(), "provided but not defined") {
				t.Errorf("sbx %s -h lists -%s, which it does not define: %s", v.name, f.name, stderr.String())
			}
		}
	}
	for verb, want := range map[string][]usageFlag{
		"plan": {{"out", true}, {"json", false}, {"detailed-exitcode", false}, {"fail-on-widen", false}, {"against", true}, {"lockfile", true}, {"lock-timeout", true}},
		"exec": {{"u", true}, {"e", true}, {"w", true}, {"i", false}, {"t", false}, {"timeout", true}},
		"fmt":  {{"check", false}, {"diff", false}, {"list", false}, {"write", false}, {"recursive", false}, {"no-color", false}},
		"cp":   {{"chown", true}},
		"ps":   {{"a", false}, {"json", false}},
	} {
		for _, f := range want {
			if !slices.Contains(byVerb[verb].flags, f) {
				t.Errorf("the flags read from sbx %s's usage, %v, lack %v", verb, byVerb[verb].flags, f)
			}
		}
	}
	if got := byVerb["run"].flags; !slices.Contains(got, usageFlag{"var", true}) || !slices.Contains(got, usageFlag{"boot-timeout", true}) {
		t.Errorf("run's flags %v lack -var or -boot-timeout", got)
	}
}

// TestCompletedArgsMatchUsage checks the table of verbs whose arguments
// are sandboxes against their usage lines.
func TestCompletedArgsMatchUsage(t *testing.T) {
	for _, v := range verbs() {
		line, _, _ := strings.Cut(strings.TrimLeft(v.usage, "\n"), "\n")
		takesSandbox := strings.Contains(line, "SANDBOX")
		kind := completedArgs[v.name]
		if takesSandbox != (kind == argsSandbox || kind == argsSandboxes || kind == argsGuestPath) {
			t.Errorf("completedArgs says %d for %q", kind, line)
		}
	}
	for name := range completedArgs {
		if _, ok := lookupVerb(name); !ok {
			t.Errorf("completedArgs names %q, which is no verb", name)
		}
	}
}

// completionWorld is a configuration directory with the sandboxes box and
// idle declared and old only in the state, and a test binary that acts
// as sbx for "__complete".
func completionWorld(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `
image "img" {
  base = "alpine:3.23"
}

sandbox "box" {
  image = image.img
}

sandbox "idle" {
  image = image.img
}
`)
	lease, err := state.Lock(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	st, err := lease.Load()
	if err != nil {
		t.Fatal(err)
	}
	st.Resources = []*state.Resource{{
		Addr:    addrs.Ref{Kind: addrs.Sandbox, Name: "old"},
		Address: "sandbox.old",
		Sandbox: &state.SandboxAttrs{Image: "img", ImageHash: "sha256:" + strings.Repeat("0", 64), CPUs: 1, Memory: 512 << 20, PolicyHash: "sha256:" + strings.Repeat("0", 64)},
	}}
	st.Outputs = map[string]*state.Output{"url": {Value: []byte(`"x"`)}, "token": {Value: []byte(`"y"`), Sensitive: true}}
	if err := lease.Save(st); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listing returns every path below dir with its size and mode.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p+" "+fi.Mode().String()+" "+fi.ModTime().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCompleteSandboxes(t *testing.T) {
	dir := completionWorld(t)
	before := listing(t, dir)
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Run(args, &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()})
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := run(completeVerb, "sandboxes", dir)
	if code != ExitOK || out != "box\nidle\nold\n" || errOut != "" {
		t.Errorf("__complete sandboxes DIR: exit %d, stdout %q, stderr %q; want the declared and the recorded sandboxes", code, out, errOut)
	}
	if code, out, errOut := run(completeVerb, "outputs", dir); code != ExitOK || out != "token\nurl\n" || errOut != "" {
		t.Errorf("__complete outputs DIR: exit %d, stdout %q, stderr %q; want the recorded outputs", code, out, errOut)
	}
	t.Chdir(dir)
	if _, out, _ := run(completeVerb, "sandboxes"); out != "box\nidle\nold\n" {
		t.Errorf("__complete sandboxes in DIR: stdout %q", out)
	}
	if after := listing(t, dir); !slices.Equal(before, after) {
		t.Errorf("__complete changed the configuration directory:\nbefore %q\nafter  %q", before, after)
	}

	// What cannot be read gives names it can, and never an error.
	broken := t.TempDir()
	writeFile(t, filepath.Join(broken, "main.hcl"), "sandbox \"half\" {\n  image = image.nope\n}\nthis is not HCL {{{\n")
	writeFile(t, filepath.Join(broken, state.Dir, state.FileName), "{not json")
	for _, d := range []string{broken, filepath.Join(broken, "missing"), filepath.Join(broken, "main.hcl")} {
		code, out, errOut := run(completeVerb, "sandboxes", d)
		if code != ExitOK || errOut != "" || strings.Contains(out, " ") {
			t.Errorf("__complete sandboxes %s: exit %d, stdout %q, stderr %q; want names only and no error", d, code, out, errOut)
		}
	}
	var help bytes.Buffer
	Run([]string{"help"}, &Env{Stdout: &help, Context: context.Background()})
	if strings.Contains(help.String(), completeVerb) || !strings.Contains(help.String(), "completion") {
		t.Errorf("help should list completion and not the hidden %s:\n%s", completeVerb, help.String())
	}
}

// completionScript returns sbx completion SHELL's output.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"completion", shell}, &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()}); code != ExitOK {
		t.Fatalf("sbx completion %s: exit %d: %s", shell, code, stderr.String())
	}
	return stdout.String()
}

// shellOutput runs a shell command bounded in time.
func shellOutput(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func TestCompletionScriptsParse(t *testing.T) {
	for _, tc := range []struct{ shell, check string }{
		{"bash", "-n"},
		{"zsh", "-n"},
		{"fish", "--no-execute"},
	} {
		t.Run(tc.shell, func(t *testing.T) {
			if _, err := exec.LookPath(tc.shell); err != nil {
				if tc.shell == "bash" {
					t.Fatal("bash is needed to check the bash completion script")
				}
				t.Skipf("%s is not installed, so its completion script is not checked", tc.shell)
			}
			path := filepath.Join(t.TempDir(), "sbx."+tc.shell)
			writeFile(t, path, completionScript(t, tc.shell))
			shellOutput(t, "", nil, tc.shell, tc.check, path)
		})
	}
	var stderr bytes.Buffer
	if code := Run([]string{"completion", "tcsh"}, &Env{Stderr: &stderr, Context: context.Background()}); code != ExitError || !strings.Contains(stderr.String(), "bash, zsh and fish") {
		t.Errorf("completion tcsh: exit %d, stderr %q", code, stderr.String())
	}
}

// TestBashCompletion drives the bash script's completion function as bash
// would, with the test binary standing in for sbx.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to check the bash completion script")
	}
	dir := completionWorld(t)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "sbx.bash")
	writeFile(t, script, completionScript(t, "bash"))
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	complete := func(line string) []string {
		t.Helper()
		// COMP_WORDS as bash splits the line (on spaces, "=" and ":").
		words := strings.Fields(strings.NewReplacer("=", " = ", ":", " : ").Replace(line))
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		words[0] = bin
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, shellQuote(w))
		}
		out := shellOutput(t, dir, []string{asSbxEnv + "=1"}, "bash", "-c", `source "$1"; COMP_WORDS=(`+strings.Join(quoted, " ")+`); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sbx; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
		got := strings.Fields(out)
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"sbx ap", []string{"apply"}},
		{"sbx comp", []string{"completion"}},
		{"sbx plan -de", []string{"-detailed-exitcode"}},
		{"sbx exec -", []string{"-e", "-i", "-t", "-timeout", "-u", "-w"}},
		{"sbx exec ", []string{"box", "idle", "old", "sub"}},
		{"sbx exec -u root b", []string{"box"}},
		{"sbx exec " + dir + " i", []string{"idle"}},
		{"sbx exec box ", nil}, // the command: files, as bash completes them
		{"sbx exec box -- echo ", nil},
		{"sbx destroy -auto-approve box ", []string{"box", "idle", "old"}},
		{"sbx destroy -lock-timeout=5s o", []string{"old"}},
		{"sbx cp i", []string{"idle:"}},
		{"sbx help de", []string{"destroy"}},
		{"sbx completion f", []string{"fish"}},
		{"sbx output ", []string{"sub", "token", "url"}},
		{"sbx output -json u", []string{"url"}},
		{"sbx output " + dir + " t", []string{"token"}},
		{"sbx output url ", nil},
	} {
		got := complete(tc.line)
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%q completes to %q, want %q", tc.line, got, tc.want)
		}
	}
	// After --, the first word is a command of the host's (bash lists
	// echo as a builtin and as each program on PATH).
	if got := complete("sbx exec box -- ech"); !slices.Contains(got, "echo") || slices.ContainsFunc(got, func(s string) bool { return !strings.HasPrefix(s, "ech") }) {
		t.Errorf("\"sbx exec box -- ech\" completes to %q, want commands starting with ech", got)
	}
}

// TestFishCompletion asks fish for completions with the script loaded.
func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed, so its completions are not checked")
	}
	dir := completionWorld(t)
	script := filepath.Join(t.TempDir(), "sbx.fish")
	writeFile(t, script, completionScript(t, "fish"))
	// fish runs the command named on the line, so name the test binary
	// sbx in a directory of its own on PATH.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "sbx")); err != nil {
		t.Fatal(err)
	}
	env := []string{asSbxEnv + "=1", "PATH=" + binDir + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}
	complete := func(line string) []string {
		out := shellOutput(t, dir, env, "fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, line)
		var got []string
		for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			if name, _, _ := strings.Cut(l, "\t"); name != "" {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		line string
		want []string // among the completions
		not  []string
	}{
		{"sbx ap", []string{"apply"}, nil},
		{"sbx plan -de", []string{"-detailed-exitcode"}, nil},
		{"sbx exec ", []string{"box", "idle", "old"}, nil},
		{"sbx cp ", []string{"box:", "idle:"}, nil},
		{"sbx exec box -- -", nil, []string{"-timeout"}},
		{"sbx output ", []string{"token", "url"}, []string{"box"}},
	} {
		got := complete(tc.line)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %q, which lacks %q", tc.line, got, w)
			}
		}
		for _, n := range tc.not {
			if slices.Contains(got, n) {
				t.Errorf("%q completes to %q, which holds %q", tc.line, got, n)
			}
		}
	}
}
