package diags

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

var spec = []byte("image \"base\" {\n  size = \"1x\"\n}\n")

func rangeAt(line int) hcl.Range {
	return hcl.Range{Filename: "sbx.hcl", Start: hcl.Pos{Line: line, Column: 3, Byte: 17}, End: hcl.Pos{Line: line, Column: 14, Byte: 28}}
}

func TestWithSubjectKeepsTextAndRange(t *testing.T) {
	inner := fmt.Errorf("image %q: %w", "base", fs.ErrNotExist)
	err := WithSubject(inner, rangeAt(2))
	if got, want := err.Error(), `sbx.hcl:2: image "base": file does not exist`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("errors.Is does not see the wrapped error")
	}
	// Wrapped again by a caller, the range is still found.
	outer := fmt.Errorf("build: %w", err)
	r, text, ok := Subject(outer)
	if !ok || r.Start.Line != 2 || text != `build: image "base": file does not exist` {
		t.Errorf("Subject(outer) = %v, %q, %v", r, text, ok)
	}
	if WithSubject(inner, hcl.Range{}) != inner {
		t.Error("a range with no file changed the error")
	}
	if WithSubject(nil, rangeAt(2)) != nil {
		t.Error("a nil error became non-nil")
	}
}

func TestAppend(t *testing.T) {
	var d Diagnostics
	d = d.Append(
		nil,
		Sourceless(Warning, "w", "wd"),
		&hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "hw"},
		hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "he", Subject: &hcl.Range{Filename: "a.hcl"}}},
		errors.Join(errors.New("one"), WithSubject(errors.New("two"), rangeAt(2))),
		Diagnostics{Errorf("e%d", 3)},
	)
	var got []string
	for _, x := range d {
		s := fmt.Sprintf("%d:%s", x.Severity, x.Summary)
		if x.Subject != nil {
			s += fmt.Sprintf("@%s:%d", x.Subject.Filename, x.Subject.Start.Line)
		}
		got = append(got, s)
	}
	want := "1:w 1:hw 0:he@a.hcl:0 0:one 0:two@sbx.hcl:2 0:e3"
	if strings.Join(got, " ") != want {
		t.Errorf("Append gave %q, want %q", strings.Join(got, " "), want)
	}
	if !d.HasErrors() {
		t.Error("HasErrors false")
	}
	if (Diagnostics{Sourceless(Warning, "w", "")}).HasErrors() {
		t.Error("a warning counts as an error")
	}
	if err := (Diagnostics{Sourceless(Warning, "w", "")}).Err(); err != nil {
		t.Errorf("Err of warnings = %v", err)
	}
	err := (Diagnostics{FromError("Cannot build image.base", WithSubject(errors.New("too big"), rangeAt(2)))}).Err()
	if err == nil || err.Error() != "sbx.hcl:2: Cannot build image.base: too big" {
		t.Errorf("Err = %v", err)
	}
}

func TestAppendPanicsOnOtherTypes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("appending a string did not panic")
		}
	}()
	Diagnostics{}.Append("text")
}

// A build error that carries its range renders as the spec language's
// diagnostics do: position and snippet, then the detail.
func TestRenderSnippet(t *testing.T) {
	d := Diagnostics{}.Append(FromError("Cannot build image.base", WithSubject(errors.New(`image "base": the root filesystem does not fit`), rangeAt(2))))
	var b bytes.Buffer
	if err := Render(&b, d, RenderOptions{Files: map[string]*hcl.File{"sbx.hcl": {Bytes: spec}}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Error: Cannot build image.base", "on sbx.hcl line 2", `size = "1x"`, `image "base": the root filesystem does not fit`} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sbx.hcl:2:") {
		t.Errorf("the position is printed twice:\n%s", out)
	}
	b.Reset()
	Render(&b, Diagnostics{Sourceless(Warning, "careful", "")}, RenderOptions{})
	if !strings.Contains(b.String(), "Warning: careful") {
		t.Errorf("warning rendered as %q", b.String())
	}
}
