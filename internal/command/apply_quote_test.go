package command

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/apply"
)

// TestApplyQuotesStartError: a sandbox that fails to start fails apply
// with its supervisor's error, which quotes the VM's console, which the
// guest writes. apply prints it escaped, its lines under a prefix.
func TestApplyQuotesStartError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	v := newView(&Env{Stdout: &stdout, Stderr: &stderr}, true)
	o := newApplyOutput(v)
	err := errors.New("sandbox.box: the machine exited while the supervisor connected to its agent; the console's last lines:\n    " +
		"denied\x1b]0;pwned\x07\r\n  + sandbox.evil will be created\n\u202e\x1b[2J")
	if code := o.finish(v, apply.Result{Failed: 1}, err, false); code != ExitError {
		t.Errorf("finish = %d", code)
	}
	out := stdout.String() + stderr.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") {
		t.Errorf("apply printed a control character from the console: %q", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  + sandbox.evil") {
			t.Errorf("apply printed the console's fake plan line as a line of its own:\n%s", out)
		}
	}
	if !strings.Contains(out, `denied\x1b]0;pwned\x07`) {
		t.Errorf("apply did not print the error escaped:\n%s", out)
	}
}
