package termtext

import (
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s escaped for one line of a terminal: every C0 control
// (newline, carriage return and tab included), DEL, every C1 control,
// the Unicode format characters (bidirectional overrides and isolates,
// zero-width characters), the line and paragraph separators and every
// byte that is not UTF-8 are written as Go escapes (\n, \r, \t, \x1b,
// \u202e), the way strconv.Quote writes them. Printable text, backslashes
// included, is left as it is.
func Line(s string) string {
	return escape(s, false)
}

// Block returns s for printing over several lines: each line is escaped
// as by Line, except that tabs are kept, and every line after the first
// starts with prefix, so none can pass for a line of sbx's own output.
// Lines end at "\n"; a "\r\n" ends a line too. Trailing line breaks are
// dropped.
func Block(s, prefix string) string {
	s = strings.TrimRight(s, "\r\n")
	if !strings.ContainsAny(s, "\n") {
		return escape(s, true)
	}
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
			b.WriteString(prefix)
		}
		b.WriteString(escape(strings.TrimSuffix(l, "\r"), true))
	}
	return b.String()
}

// needsEscape reports whether r is escaped: a control, a format
// character, a line or paragraph separator, or the error rune of an
// invalid byte (handled by the caller).
func needsEscape(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) ||
		unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// safe reports whether s needs no escaping; keepTabs lets tabs through.
func safe(s string, keepTabs bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && !(keepTabs && c == '\t')) || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || needsEscape(r) {
			return false
		}
		i += n
	}
	return true
}

func escape(s string, keepTabs bool) string {
	if safe(s, keepTabs) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	appendEscaped(&b, s, keepTabs)
	return b.String()
}

const hex = "0123456789abcdef"

// appendEscaped writes s to b with what needs it escaped. s must hold
// whole runes, except that an invalid byte is escaped as \xNN.
func appendEscaped(b *strings.Builder, s string, keepTabs bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&0xf])
		case r == '\t' && keepTabs:
			b.WriteByte('\t')
		case !needsEscape(r):
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100:
			b.WriteString(`\x`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		case r < 0x10000:
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[r>>shift&0xf])
			}
		default:
			b.WriteString(`\U`)
			for shift := 28; shift >= 0; shift -= 4 {
				b.WriteByte(hex[r>>shift&0xf])
			}
		}
		i += n
	}
}

// Writer escapes what is written through it to w: each line as by Block
// (tabs kept, every other control escaped) with its line breaks ("\n"
// and "\r\n") kept, and no prefix. A rune split between two writes is
// escaped whole once its end arrives; call Flush after the last write.
type Writer struct {
	w       io.Writer
	pending []byte // the start of a rune split across writes
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it. It returns len(p) when the escaped text
// was written whole.
func (w *Writer) Write(p []byte) (int, error) {
	data := append(w.pending, p...)
	w.pending = nil
	// Keep back an incomplete rune at the end, at most utf8.UTFMax-1
	// bytes, for the next write.
	cut := len(data)
	for k := 1; k < utf8.UTFMax && k <= len(data); k++ {
		c := data[len(data)-k]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(data[len(data)-k:]) {
				cut = len(data) - k
			}
			break
		}
	}
	// A carriage return at the end may be the start of a "\r\n".
	if cut > 0 && data[cut-1] == '\r' {
		cut--
	}
	w.pending = append([]byte(nil), data[cut:]...)
	var b strings.Builder
	lines := strings.SplitAfter(string(data[:cut]), "\n")
	for _, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		nl := len(body) < len(l)
		crlf := nl && strings.HasSuffix(body, "\r")
		if crlf {
			body = body[:len(body)-1]
		}
		appendEscaped(&b, body, true)
		if crlf {
			b.WriteString("\r\n")
		} else if nl {
			b.WriteByte('\n')
		}
	}
	if _, err := io.WriteString(w.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes an incomplete rune held back at the end, escaped.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	var b strings.Builder
	appendEscaped(&b, string(w.pending), true)
	w.pending = nil
	_, err := io.WriteString(w.w, b.String())
	return err
}
