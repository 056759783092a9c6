package diags

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Severity says whether a diagnostic stops the operation.
type Severity int

const (
	// Error means the operation did not do what was asked.
	Error Severity = iota
	// Warning is worth reading but stopped nothing.
	Warning
)

// Diagnostic is one error or warning.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	// Subject is the source range the diagnostic is about, or nil.
	Subject *hcl.Range
}

// Diagnostics is a list of diagnostics, in the order they arose. The nil
// value is an empty list.
type Diagnostics []Diagnostic

// Errorf returns an error diagnostic with no detail and no subject.
func Errorf(format string, args ...any) Diagnostic {
	return Diagnostic{Severity: Error, Summary: fmt.Sprintf(format, args...)}
}

// Sourceless returns a diagnostic with a summary and detail and no
// subject.
func Sourceless(sev Severity, summary, detail string) Diagnostic {
	return Diagnostic{Severity: sev, Summary: summary, Detail: detail}
}

// Append adds items to diags and returns the result. An item is a
// Diagnostic, Diagnostics, *hcl.Diagnostic, hcl.Diagnostics or an error
// (nil values add nothing). An error becomes an error diagnostic whose
// summary is its text; where the error wraps a subject (WithSubject), the
// diagnostic has that subject and the text without the "file:line: "
// prefix. An errors.Join tree becomes one diagnostic per joined error.
// Any other item panics: it is a programming error.
func (diags Diagnostics) Append(items ...any) Diagnostics {
	for _, item := range items {
		switch it := item.(type) {
		case nil:
		case Diagnostic:
			diags = append(diags, it)
		case Diagnostics:
			diags = append(diags, it...)
		case *hcl.Diagnostic:
			if it != nil {
				diags = append(diags, fromHCL(it))
			}
		case hcl.Diagnostics:
			for _, d := range it {
				diags = append(diags, fromHCL(d))
			}
		case error:
			diags = appendError(diags, it)
		default:
			panic(fmt.Sprintf("diags.Append: cannot append a %T", item))
		}
	}
	return diags
}

func appendError(diags Diagnostics, err error) Diagnostics {
	if err == nil {
		return diags
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			diags = appendError(diags, e)
		}
		return diags
	}
	d := Diagnostic{Severity: Error, Summary: err.Error()}
	if r, text, ok := Subject(err); ok {
		d.Summary, d.Subject = text, r
	}
	return append(diags, d)
}

// FromError returns an error diagnostic saying summary, with err's text
// as its detail and, where err is about a source range (WithSubject),
// that range as its subject and the text without its "file:line: ".
func FromError(summary string, err error) Diagnostic {
	d := Diagnostic{Severity: Error, Summary: summary, Detail: err.Error()}
	if r, text, ok := Subject(err); ok {
		d.Detail, d.Subject = text, r
	}
	return d
}

func fromHCL(d *hcl.Diagnostic) Diagnostic {
	out := Diagnostic{Severity: Error, Summary: d.Summary, Detail: d.Detail, Subject: d.Subject}
	if d.Severity == hcl.DiagWarning {
		out.Severity = Warning
	}
	return out
}

// HasErrors reports whether any diagnostic is an error.
func (diags Diagnostics) HasErrors() bool {
	for _, d := range diags {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Err returns the error diagnostics as one error, or nil when there are
// none. Each diagnostic reads "summary: detail", after "file:line: " where
// it has a subject; several are joined (errors.Join).
func (diags Diagnostics) Err() error {
	var errs []error
	for _, d := range diags {
		if d.Severity != Error {
			continue
		}
		text := d.Summary
		if d.Detail != "" {
			text += ": " + d.Detail
		}
		if d.Subject != nil {
			text = Where(*d.Subject) + text
		}
		errs = append(errs, errors.New(text))
	}
	return errors.Join(errs...)
}

// HCL returns diags as hcl.Diagnostics, for hcl's writer and for code
// that takes them.
func (diags Diagnostics) HCL() hcl.Diagnostics {
	out := make(hcl.Diagnostics, 0, len(diags))
	for _, d := range diags {
		sev := hcl.DiagError
		if d.Severity == Warning {
			sev = hcl.DiagWarning
		}
		out = append(out, &hcl.Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail, Subject: d.Subject})
	}
	return out
}

// Where names a source position as "file:line: ", or "" for a range with
// no file (a block built in code rather than read from a spec).
func Where(r hcl.Range) string {
	if r.Filename == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d: ", r.Filename, r.Start.Line)
}

// subjectError is an error about a source range.
type subjectError struct {
	err     error
	subject hcl.Range
}

// WithSubject returns err as an error about the source range r: its text
// is err's after Where(r), errors.Is and errors.As see err through it,
// and Append makes it a diagnostic with r as its subject. A range with no
// file returns err as it is; so does a nil err (nil).
func WithSubject(err error, r hcl.Range) error {
	if err == nil || r.Filename == "" {
		return err
	}
	return &subjectError{err: err, subject: r}
}

func (e *subjectError) Error() string { return Where(e.subject) + e.err.Error() }
func (e *subjectError) Unwrap() error { return e.err }

// Subject returns the source range err, or an error it wraps, is about
// (WithSubject), and err's text without that range's "file:line: ".
func Subject(err error) (*hcl.Range, string, bool) {
	var s *subjectError
	if !errors.As(err, &s) {
		return nil, "", false
	}
	r := s.subject
	return &r, strings.Replace(err.Error(), Where(r), "", 1), true
}

// RenderOptions say how Render prints.
type RenderOptions struct {
	// Files maps file names to their parsed source, for snippets; a
	// diagnostic whose subject's file is missing is printed without one.
	Files map[string]*hcl.File
	// Width wraps text at that many columns; 0 does not wrap.
	Width uint
	// Color uses terminal colours.
	Color bool
}

// Render writes diags to w, each as the spec language's diagnostics
// are written: "Error: summary" or "Warning: summary", the subject's
// position and source snippet where it has one, then the detail.
func Render(w io.Writer, diags Diagnostics, opts RenderOptions) error {
	if len(diags) == 0 {
		return nil
	}
	tw := hcl.NewDiagnosticTextWriter(w, opts.Files, opts.Width, opts.Color)
	for _, d := range diags.HCL() {
		if err := tw.WriteDiagnostic(d); err != nil {
			return err
		}
	}
	return nil
}
