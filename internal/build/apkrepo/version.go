package apkrepo

import "strings"

// Alpine versions are number{.number}...{letter}{_suffix{number}}...{~hash}{-rN}.
// A version is read as a sequence of tokens whose kinds may only move
// forward in this order (a number may follow a letter only as a dotted
// component before it, never after).
type tokenKind int

const (
	tokInitial  tokenKind = iota // the leading number
	tokDigit                     // a later .number
	tokLetter                    // one lower-case letter after the numbers
	tokSuffix                    // _alpha, _beta, _pre, _rc, _cvs, _svn, _git, _hg, _p
	tokSuffixNo                  // the number after a suffix
	tokHash                      // ~ and lower-case hex digits
	tokRevision                  // -rN
	tokEnd
	tokInvalid
)

// suffixRank orders suffixes: the pre-release ones sort below a version
// without suffix (rankNone), the others above it.
var suffixRank = map[string]int{"alpha": 0, "beta": 1, "pre": 2, "rc": 3, "cvs": 5, "svn": 6, "git": 7, "hg": 8, "p": 9}

const rankNone = 4

type token struct {
	kind   tokenKind
	val    string // the token's text (digits without the dot)
	suffix int
}

type versionLexer struct {
	s   string
	pos int
	tok token
}

func (l *versionLexer) digits() string {
	start := l.pos
	for l.pos < len(l.s) && l.s[l.pos] >= '0' && l.s[l.pos] <= '9' {
		l.pos++
	}
	return l.s[start:l.pos]
}

func (l *versionLexer) first() {
	l.tok = token{kind: tokInitial, val: l.digits()}
	if l.tok.val == "" {
		l.tok.kind = tokInvalid
	}
}

func (l *versionLexer) next() {
	if l.pos >= len(l.s) {
		l.tok.kind = tokEnd
		return
	}
	prev := l.tok.kind
	invalid := func() { l.tok = token{kind: tokInvalid} }
	c := l.s[l.pos]
	switch {
	case c >= 'a' && c <= 'z':
		if prev > tokDigit {
			invalid()
			return
		}
		l.tok = token{kind: tokLetter, val: l.s[l.pos : l.pos+1]}
		l.pos++
	case c == '.' || c >= '0' && c <= '9':
		if c == '.' {
			if prev > tokDigit {
				invalid()
				return
			}
			l.pos++
		}
		switch prev {
		case tokInitial, tokDigit:
			l.tok = token{kind: tokDigit}
		case tokSuffix:
			l.tok = token{kind: tokSuffixNo}
		default:
			invalid()
			return
		}
		l.tok.val = l.digits()
		if l.tok.val == "" {
			invalid()
		}
	case c == '_':
		if prev > tokSuffixNo {
			invalid()
			return
		}
		l.pos++
		start := l.pos
		for l.pos < len(l.s) && l.s[l.pos] >= 'a' && l.s[l.pos] <= 'z' {
			l.pos++
		}
		rank, ok := suffixRank[l.s[start:l.pos]]
		if !ok {
			invalid()
			return
		}
		l.tok = token{kind: tokSuffix, val: l.s[start:l.pos], suffix: rank}
	case c == '~':
		if prev >= tokHash {
			invalid()
			return
		}
		l.pos++
		start := l.pos
		for l.pos < len(l.s) && (l.s[l.pos] >= '0' && l.s[l.pos] <= '9' || l.s[l.pos] >= 'a' && l.s[l.pos] <= 'f') {
			l.pos++
		}
		if l.pos == start {
			invalid()
			return
		}
		l.tok = token{kind: tokHash, val: l.s[start:l.pos]}
	case c == '-':
		if prev >= tokRevision || !strings.HasPrefix(l.s[l.pos:], "-r") {
			invalid()
			return
		}
		l.pos += 2
		l.tok = token{kind: tokRevision, val: l.digits()}
		if l.tok.val == "" {
			invalid()
		}
	default:
		invalid()
	}
}

// ValidVersion reports whether v is a well-formed Alpine version.
func ValidVersion(v string) bool {
	l := versionLexer{s: v}
	for l.first(); l.tok.kind < tokEnd; l.next() {
	}
	return l.tok.kind == tokEnd
}

// CompareVersions orders two Alpine versions: -1 if a sorts before b, 0
// if they are equal, +1 if after. The rules, as apk applies them:
//
//   - Tokens are compared pairwise while both versions have a token of
//     the same kind. Numbers compare as integers of any length, except
//     that a dotted component with a leading zero on either side compares
//     as a string ("1.01" < "1.1", "8.2.0015" < "8.2.002"). Letters
//     compare by character, suffixes by rank (alpha < beta < pre < rc <
//     none < cvs < svn < git < hg < p), hashes as strings.
//   - When one version runs out or the kinds differ, a version that
//     continues with a pre-release suffix is older ("1.0_rc1" < "1.0");
//     otherwise the one whose next token comes earlier in the grammar is
//     newer: more dotted components beat a letter, which beats a suffix,
//     which beats a revision, which beats the end ("1.0" < "1.0a" <
//     "1.0.1", "1.0" < "1.0-r1", "1.0" < "1.0_p1").
//
// Invalid versions sort below anything valid at the point they go wrong,
// as in apk; callers that care check ValidVersion first.
func CompareVersions(a, b string) int {
	return compareVersions(a, b, false)
}

// compareVersions with fuzzy set treats a as equal to b when b is a
// token-wise prefix of a ("3.6.9" ~ "3.6").
func compareVersions(a, b string, fuzzy bool) int {
	la, lb := versionLexer{s: a}, versionLexer{s: b}
	la.first()
	lb.first()
	for la.tok.kind == lb.tok.kind && la.tok.kind < tokEnd {
		if r := compareTokens(la.tok, lb.tok); r != 0 {
			return r
		}
		la.next()
		lb.next()
	}
	ka, kb := la.tok.kind, lb.tok.kind
	switch {
	case ka == kb:
		return 0
	case kb == tokEnd && fuzzy:
		return 0
	case ka == tokSuffix && la.tok.suffix < rankNone:
		return -1
	case kb == tokSuffix && lb.tok.suffix < rankNone:
		return 1
	case ka > kb:
		return -1
	default:
		return 1
	}
}

func compareTokens(a, b token) int {
	switch a.kind {
	case tokDigit:
		if strings.HasPrefix(a.val, "0") || strings.HasPrefix(b.val, "0") {
			return strings.Compare(a.val, b.val)
		}
		return compareNumbers(a.val, b.val)
	case tokInitial, tokSuffixNo, tokRevision:
		return compareNumbers(a.val, b.val)
	case tokSuffix:
		return sign(a.suffix - b.suffix)
	default:
		return strings.Compare(a.val, b.val)
	}
}

// compareNumbers compares decimal digit strings as integers of any size.
func compareNumbers(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return sign(len(a) - len(b))
	}
	return strings.Compare(a, b)
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
