package command

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/termtext"
	"golang.org/x/term"
)

// view prints diagnostics and messages for one command run. Colour is on
// only when the stream is a terminal, NO_COLOR is unset (or empty) and
// -no-color was not given.
type view struct {
	stdout, stderr     io.Writer
	colorOut, colorErr bool
	width              uint
}

func newView(env *Env, noColor bool) *view {
	v := &view{stdout: env.Stdout, stderr: env.Stderr}
	if nc, _ := env.getenv("NO_COLOR"); nc != "" {
		noColor = true
	}
	if fd, ok := terminalFD(env.Stderr); ok {
		v.colorErr = !noColor
		if w, _, err := term.GetSize(fd); err == nil && w > 0 {
			v.width = uint(w)
		}
	}
	if _, ok := terminalFD(env.Stdout); ok {
		v.colorOut = !noColor
	}
	return v
}

// terminalFD returns w's file descriptor if w is a terminal.
func terminalFD(w io.Writer) (int, bool) {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// quotePrefix starts every line after the first of text that sbx
// prints but does not control, so that none passes for sbx's own.
const quotePrefix = "  | "

// quoteErr renders an error whose text may come from a guest, a
// supervisor or a VM's console (package termtext): control characters
// escaped, every line after the first under quotePrefix.
func quoteErr(err error) string { return termtext.Block(err.Error(), quotePrefix) }

// quoteText is quoteErr for text.
func quoteText(s string) string { return termtext.Block(s, quotePrefix) }

// diagnostics prints diags to stderr with source snippets from files.
func (v *view) diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	w := hcl.NewDiagnosticTextWriter(v.stderr, files, v.width, v.colorErr)
	for _, d := range diags {
		_ = w.WriteDiagnostic(d)
	}
}

// errorf prints an error without a source position, in the same shape as
// diagnostics.
func (v *view) errorf(summary string, args ...any) {
	v.diagnostics(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: fmt.Sprintf(summary, args...)}})
}

// errorDetail prints an error with a detail paragraph.
func (v *view) errorDetail(summary, detail string) {
	v.diagnostics(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail}})
}

// println prints a line to stdout.
func (v *view) println(format string, args ...any) {
	fmt.Fprintf(v.stdout, format+"\n", args...)
}

// bold returns s in bold when stdout is coloured.
func (v *view) bold(s string) string {
	if !v.colorOut {
		return s
	}
	return "\x1b[1m" + s + "\x1b[0m"
}
