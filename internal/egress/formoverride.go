package egress

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"
)

// formBody reports whether a POST body with these headers is one that
// frameworks parse as form fields, and so may carry a _method field that
// Rails (Rack::MethodOverride), Symfony, Laravel and Express's
// method-override read as the request's real method: no Content-Type
// (Rack parses such a POST as a form), a form type, any multipart type,
// or a Content-Type that does not parse.
func formBody(h http.Header) bool {
	cts := h.Values("Content-Type")
	if len(cts) == 0 {
		return true
	}
	for _, ct := range cts {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt == "application/x-www-form-urlencoded" || strings.HasPrefix(mt, "multipart/") {
			return true
		}
	}
	return false
}

// formOverrideError fails a form body that carries a _method field.
type formOverrideError struct{ reason string }

func (e *formOverrideError) Error() string { return e.reason }

// maxFieldName bounds the form field name and multipart header line the
// scanner holds; a longer one that could be the field is refused.
const maxFieldName = 8 << 10

// formOverrideScanner passes a form body through and fails the read,
// before the bytes that complete it are passed on (so the upstream never
// gets a whole body to act on), once it sees a _method field
// (isMethodParam): as a URL-encoded name ("&_method=", "&%5Fmethod=") or
// as the name of a multipart part (a Content-Disposition line naming it,
// quoted, unquoted or RFC 2231 encoded). Both are looked for in every
// form body, whatever its Content-Type claims, since servers may sniff.
type formOverrideScanner struct {
	src     io.ReadCloser
	refusal string // the reason, naming the rule

	name     []byte // the URL-encoded field name being read
	longName bool   // name outgrew maxFieldName; name holds its end
	inValue  bool
	line     []byte // the line being read, for multipart part headers
	long     bool   // line outgrew maxFieldName
	err      error
}

func newFormOverrideScanner(src io.ReadCloser, refusal string) *formOverrideScanner {
	return &formOverrideScanner{src: src, refusal: refusal}
}

func (s *formOverrideScanner) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.src.Read(p)
	for _, c := range p[:n] {
		if what := s.step(c); what != "" {
			s.err = &formOverrideError{reason: s.refusal + ": the form body carries " + what + ", which servers read as another method"}
			return 0, s.err
		}
	}
	if err == io.EOF {
		if what := s.end(); what != "" {
			s.err = &formOverrideError{reason: s.refusal + ": the form body carries " + what + ", which servers read as another method"}
			return 0, s.err
		}
	}
	return n, err
}

func (s *formOverrideScanner) Close() error { return s.src.Close() }

// step takes one byte and returns what it found, or "".
func (s *formOverrideScanner) step(c byte) string {
	// URL-encoded fields: name=value separated by "&" or ";".
	switch {
	case s.inValue && (c == '&' || c == ';'):
		s.inValue, s.name = false, s.name[:0]
	case s.inValue:
	case c == '=' || c == '&' || c == ';':
		if what := s.nameEnd(); what != "" {
			return what
		}
		s.inValue, s.name, s.longName = c == '=', s.name[:0], false
	case len(s.name) >= maxFieldName:
		// Only padding (leading spaces, which PHP drops) can make a long
		// name read as _method: keep its end.
		s.longName = true
		s.name = append(s.name[:0], s.name[len(s.name)-64:]...)
		s.name = append(s.name, c)
	default:
		s.name = append(s.name, c)
	}
	// Multipart part headers, a line at a time.
	if c == '\n' {
		what := s.headerLine()
		s.line, s.long = s.line[:0], false
		return what
	}
	if len(s.line) < maxFieldName {
		s.line = append(s.line, c)
	} else {
		s.long = true
	}
	return ""
}

// end checks what the body ends with. A URL-encoded name without "=" at
// the very end sets nothing (servers read it as empty, which overrides
// nothing).
func (s *formOverrideScanner) end() string {
	return s.headerLine()
}

// nameEnd checks the URL-encoded name just ended.
func (s *formOverrideScanner) nameEnd() string {
	if s.longName {
		if strings.HasSuffix(strings.ToLower(queryUnescapeLenient(string(s.name))), "method") {
			return "a long form field name ending in \"method\""
		}
		return ""
	}
	if isMethodParam(string(s.name)) {
		return "a _method field (" + oneLine(string(s.name)) + ")"
	}
	return ""
}

// headerLine checks a Content-Disposition line for a part named _method.
func (s *formOverrideScanner) headerLine() string {
	line := bytes.TrimRight(s.line, "\r")
	const cd = "content-disposition"
	t := bytes.TrimLeft(line, " \t")
	if len(t) < len(cd) || !strings.EqualFold(string(t[:len(cd)]), cd) {
		return ""
	}
	if s.long {
		return "a multipart header line longer than 8 KiB, which cannot be checked"
	}
	_, v, ok := strings.Cut(string(t), ":")
	if !ok {
		return ""
	}
	_, params, err := mime.ParseMediaType(v)
	if err != nil {
		// Unparsed: refuse when it could name the field at all.
		if strings.Contains(strings.ToLower(v), "method") {
			return "a multipart part whose Content-Disposition does not parse and mentions \"method\""
		}
		return ""
	}
	if isMethodParam(params["name"]) {
		return "a multipart part named " + oneLine(params["name"])
	}
	return ""
}
