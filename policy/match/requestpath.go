package match

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file holds the one form of request path that path patterns are
// matched against. Servers do not agree on what a path means: Tomcat,
// Jetty and Spring strip ";" parameters from each segment before they
// route ("/public/..;/admin" is "/admin" to them), IIS and some Java
// servers read "\" as "/", most resolve "." and ".." after decoding, some
// decode twice, some merge "//", some decode "%2F" into a separator and
// some NFKC-normalise. A path that could mean anything other than its
// plain segments to any of them is refused under a path rule rather than
// matched, so that what a pattern admits is what every server routes.

// CheckRequestPath reports why a request path cannot be held to path
// patterns, or nil when it can. path is the request target as the
// upstream receives it, percent-escaped, without the query. Refused, with
// an error saying which:
//
//   - a target that is not an absolute path ("*", an absolute URI, an
//     empty path);
//   - an empty segment other than the last ("//"), which servers may merge;
//   - a "." or ".." segment, and an encoded "." anywhere ("%2e"), which no
//     client needs (RFC 3986 says unreserved characters are not encoded);
//   - ";" in a segment, raw or encoded ("%3B"): a path parameter;
//   - "\" raw or encoded ("%5C");
//   - an encoded "%" ("%25"), which a server that decodes twice reads as
//     another escape ("%252e" is ".");
//   - a control byte (NUL, CR, LF, ...) once decoded, an invalid escape, or
//     a segment that does not decode to valid UTF-8 (overlong forms such
//     as "%c0%ae" are "." to some decoders);
//   - a character that Unicode normalisation turns into dots or into
//     something holding "/", "\", ";" or "%" (fullwidth and small forms,
//     dot leaders, "\u2100" which is "a/c");
//   - an encoded "/" ("%2F") whose decoding would make an empty or dot
//     segment. Otherwise an encoded "/" is allowed, and Path.Match requires
//     the path to match whether or not the server decodes it.
func CheckRequestPath(path string) error {
	if path == "*" {
		return fmt.Errorf("the request target is %q, not a path", path)
	}
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("the request target %q is not an absolute path", path)
	}
	raw := strings.Split(path[1:], "/")
	for i, r := range raw {
		if r == "" && i != len(raw)-1 {
			return fmt.Errorf("the path holds an empty segment (\"//\"), which servers may merge")
		}
		if err := checkRawSegment(r); err != nil {
			return fmt.Errorf("the path %v", err)
		}
	}
	// The same path with every encoded "/" decoded, as a server that
	// decodes before it splits would see it.
	if hasEncodedSlash(path) {
		split := strings.Split(decodeSlashes(path)[1:], "/")
		for i, s := range split {
			if s == "" && i != len(split)-1 {
				return fmt.Errorf("the path holds an encoded \"/\" (%%2F) that makes an empty segment once decoded")
			}
			if s == "." || s == ".." {
				return fmt.Errorf("the path holds an encoded \"/\" (%%2F) that makes a %q segment once decoded", s)
			}
		}
	}
	return nil
}

// checkRawSegment checks one percent-escaped segment; its error completes
// "the path ...".
func checkRawSegment(r string) error {
	var dec []byte
	for i := 0; i < len(r); i++ {
		c := r[i]
		if c == '%' {
			if i+2 >= len(r) || unhex(r[i+1]) < 0 || unhex(r[i+2]) < 0 {
				return fmt.Errorf("holds an invalid escape (%q)", r[i:min(i+3, len(r))])
			}
			c = byte(unhex(r[i+1])<<4 | unhex(r[i+2]))
			switch c {
			case '.':
				return fmt.Errorf("holds an encoded \".\" (%s), which servers may decode into a dot segment", r[i:i+3])
			case '%':
				return fmt.Errorf("holds an encoded \"%%\" (%s), which a server that decodes twice reads as another escape", r[i:i+3])
			case ';':
				return fmt.Errorf("holds an encoded \";\" (%s), a path parameter to some servers", r[i:i+3])
			case '\\':
				return fmt.Errorf("holds an encoded \"\\\" (%s), which some servers read as \"/\"", r[i:i+3])
			}
			i += 2
		} else {
			switch c {
			case ';':
				return fmt.Errorf("holds \";\", a path parameter that servers such as Tomcat, Jetty and Spring strip before routing")
			case '\\':
				return fmt.Errorf("holds \"\\\", which some servers read as \"/\"")
			}
		}
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("holds the control byte %#02x", c)
		}
		dec = append(dec, c)
	}
	s := string(dec)
	if s == "." || s == ".." {
		return fmt.Errorf("holds a %q segment", s)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("holds a segment that is not valid UTF-8 once decoded")
	}
	for _, r := range s {
		if to, ok := lookalikes[r]; ok {
			return fmt.Errorf("holds %U, which Unicode normalisation turns into %q", r, to)
		}
	}
	return nil
}

// lookalikes are the characters whose compatibility normalisation (NFKC)
// is made only of dots or holds "/", "\\", ";" or "%", with what it gives:
// Greek question mark, dot leaders and ellipses, the "a/c"-style symbols,
// small and fullwidth forms. TestLookalikesComplete checks the list
// against Unicode's tables.
var lookalikes = map[rune]string{
	'\u037e': ";", '\u2024': ".", '\u2025': "..", '\u2026': "...",
	'\u2100': "a/c", '\u2101': "a/s", '\u2105': "c/o", '\u2106': "c/u",
	'\ufe14': ";", '\ufe19': "...", '\ufe30': "..", '\ufe52': ".", '\ufe54': ";",
	'\ufe68': "\\", '\ufe6a': "%", '\uff05': "%", '\uff0e': ".", '\uff0f': "/",
	'\uff1b': ";", '\uff3c': "\\",
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func hasEncodedSlash(path string) bool {
	return strings.Contains(path, "%2F") || strings.Contains(path, "%2f")
}

// decodeSlashes decodes every "%2F" of path and nothing else.
func decodeSlashes(path string) string {
	return strings.NewReplacer("%2F", "/", "%2f", "/").Replace(path)
}
