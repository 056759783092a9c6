package plan_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
)

// TestRenderQuotesRuntimeReason: a sandbox that no longer runs is
// replaced "because it no longer runs (REASON)", and REASON quotes the
// supervisor's error and the VM's console, which a hostile guest writes
// (and a state file in a checkout can hold anything). Rendered, it must
// neither reach the terminal as escape sequences nor start plan lines of
// its own.
func TestRenderQuotesRuntimeReason(t *testing.T) {
	const console = "its supervisor (pid 41) has exited: the console's last lines:\n" +
		"    \x1b]0;pwned\x07boot\r\n  + sandbox.evil will be created\n\u202e\x9b2J"
	before := sandbox("box", func(s *state.SandboxAttrs) {
		s.Runtime = &state.Runtime{Dir: "/run/sbx/x/box", Pid: 41, Gone: console}
	})
	p := plan.Compute([]*state.Resource{sandbox("box", nil)}, []*state.Resource{before})
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		if err := plan.Render(&out, p, plan.RenderOptions{Color: color}); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		if color {
			// The renderer's own colours are SGR sequences; drop
			// them, and what is left must hold no ESC.
			for _, sgr := range []string{"\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m"} {
				text = strings.ReplaceAll(text, sgr, "")
			}
		}
		if strings.ContainsAny(text, "\x1b\x07\r\u202e\u009b") {
			t.Errorf("color %v: the plan holds a control character from the runtime:\n%q", color, text)
		}
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "  + sandbox.evil") {
				t.Errorf("color %v: the runtime's text made a plan line of its own:\n%s", color, text)
			}
		}
		if !strings.Contains(text, `it no longer runs (its supervisor (pid 41) has exited: the console's last lines:\n    \x1b]0;pwned\x07boot\r\n  + sandbox.evil`) {
			t.Errorf("color %v: the reason is not shown escaped:\n%s", color, text)
		}
	}
}

// TestRenderQuotesConfigText: policy details and origins come from the
// configuration — rule values and file names a pull request writes. A
// hide rule or a file name carrying escape sequences and newlines must
// neither drive the terminal nor draw a plan line of its own (a fake
// "narrows" over a real widening).
func TestRenderQuotesConfigText(t *testing.T) {
	const evil = ".env\x1b[1A\x1b[2K\n        - [narrows] egress allow \"api.anthropic.com\"\u202e"
	before := sandbox("box", nil)
	after := sandbox("box", func(s *state.SandboxAttrs) {
		s.Policy.Mounts[0].Hide = []string{evil}
		s.Policy.Mounts[0].Origin.File = "x\x1b]0;pwned\x07.hcl"
	})
	p := plan.Compute([]*state.Resource{after}, []*state.Resource{before})
	var out bytes.Buffer
	if err := plan.Render(&out, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, "x1b[1A") {
		t.Fatalf("the plan does not show the rule at all:\n%s", text)
	}
	if strings.ContainsAny(text, "\x1b\x07\u202e") {
		t.Errorf("the plan holds a control character from the configuration:\n%q", text)
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "- [narrows] egress") {
			t.Errorf("the configuration's text made a plan line of its own:\n%s", text)
		}
	}
}
