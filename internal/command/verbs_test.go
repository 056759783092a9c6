package command

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUnknownCommandSuggests checks the "Did you mean" for a mistyped
// command, to sbx and to sbx help.
func TestUnknownCommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the suggestion line, or "" for none
	}{
		{[]string{"aply"}, `Did you mean "apply"?`},
		{[]string{"destory", "-auto-approve"}, `Did you mean "destroy"?`},
		{[]string{"valdate"}, `Did you mean "validate"?`},
		{[]string{"help", "exce"}, `Did you mean "exec"?`},
		{[]string{"frobnicate"}, ""},
		{[]string{"x"}, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(tc.args, &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()})
		errOut := stderr.String()
		name := tc.args[0]
		if name == "help" {
			name = tc.args[1]
		}
		if code != ExitError || !strings.Contains(errOut, `Unknown command "`+name+`"`) || !strings.Contains(errOut, "Commands:") {
			t.Errorf("sbx %s: exit %d, stderr:\n%s", strings.Join(tc.args, " "), code, errOut)
		}
		if tc.want == "" && strings.Contains(errOut, "Did you mean") {
			t.Errorf("sbx %s suggests a command far from it:\n%s", strings.Join(tc.args, " "), errOut)
		}
		if tc.want != "" && !strings.Contains(errOut, tc.want) {
			t.Errorf("sbx %s: stderr lacks %s:\n%s", strings.Join(tc.args, " "), tc.want, errOut)
		}
	}
}

// TestUsageLayout checks every verb's usage text: lines fit in 80
// columns, and in the options every description starts in column 23 (a
// long option stands alone with its description on the next line), so
// that the options of one verb, and of all verbs, line up.
func TestUsageLayout(t *testing.T) {
	const descCol = 22 // zero-based
	for _, v := range verbs() {
		usage := strings.TrimLeft(v.usage, "\n")
		if !strings.HasPrefix(usage, "Usage: sbx "+v.name) {
			t.Errorf("sbx %s's usage starts %q", v.name, strings.SplitN(usage, "\n", 2)[0])
		}
		for i, line := range strings.Split(usage, "\n") {
			if len([]rune(line)) > 80 {
				t.Errorf("sbx %s usage line %d is %d columns wide: %q", v.name, i+1, len([]rune(line)), line)
			}
		}
		_, opts, ok := strings.Cut(usage, "\nOptions:\n")
		if !ok {
			continue
		}
		for line := range strings.SplitSeq(opts, "\n") {
			indent := len(line) - len(strings.TrimLeft(line, " "))
			switch {
			case strings.TrimSpace(line) == "":
			case strings.HasPrefix(line, "  -"):
				flag, _, _ := strings.Cut(line[2:], "  ")
				if len(line) > 2+len(flag) && (len(line) <= descCol || line[descCol-1] != ' ' || line[descCol] == ' ') {
					t.Errorf("sbx %s: the description of %s does not start in column %d: %q", v.name, flag, descCol+1, line)
				}
			case indent > 2 && indent < descCol:
				t.Errorf("sbx %s: a continuation line is indented %d, not %d: %q", v.name, indent, descCol, line)
			}
		}
	}
}
