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
		if code != ExitError || !strings.Contains(errOut, `unknown command "`+name+`"`) || !strings.Contains(errOut, "Commands:") {
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
