package command

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/diags"
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
	// files are the configuration's sources, for the snippets of
	// errors about a spec block raised after loading (errorFrom).
	files map[string]*hcl.File
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

// diagnostics prints the spec language's diagnostics to stderr with
// source snippets from files, as render does.
func (v *view) diagnostics(files map[string]*hcl.File, ds hcl.Diagnostics) {
	v.render(files, diags.Diagnostics{}.Append(ds))
}

// render prints diagnostics to stderr with source snippets from files:
// the one renderer (diags.Render) every error and warning sbx prints
// about a configuration or an operation goes through.
func (v *view) render(files map[string]*hcl.File, ds diags.Diagnostics) {
	_ = diags.Render(v.stderr, ds, diags.RenderOptions{Files: files, Width: v.width, Color: v.colorErr})
}

// errorf prints an error without a source position, in the same shape as
// diagnostics.
func (v *view) errorf(summary string, args ...any) {
	v.render(nil, diags.Diagnostics{diags.Errorf(summary, args...)})
}

// errorDetail prints an error with a detail paragraph.
func (v *view) errorDetail(summary, detail string) {
	v.render(nil, diags.Diagnostics{diags.Sourceless(diags.Error, summary, detail)})
}

// warning prints a warning with a detail paragraph.
func (v *view) warning(summary, detail string) {
	v.render(nil, diags.Diagnostics{diags.Sourceless(diags.Warning, summary, detail)})
}

// errorFrom prints err as an error saying summary, with err's text as
// the detail (with quote, quoted as quoteErr does, for text that may be
// a guest's or a VM console's), and, where err is about a spec block
// (diags.WithSubject), that block's position and snippet.
func (v *view) errorFrom(summary string, err error, quote bool) {
	d := diags.FromError(summary, err)
	if quote {
		d.Detail = quoteText(d.Detail)
	}
	v.render(v.files, diags.Diagnostics{d})
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
