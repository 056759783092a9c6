package gitpush

import "strings"

// IsReceivePack reports whether a request may be a git smart-HTTP push,
// so that its ref updates must be read and checked. It errs wide, since
// a push it missed would reach the server unchecked and git servers
// differ in how they route:
//
//   - every method but GET and HEAD counts, in any case ("post" is a push
//     to a server that folds case; GET and HEAD only ever fetch);
//   - the path and query are decoded until they no longer change (four
//     rounds at most, invalid escapes left as they are), folded to lower
//     case and stripped of everything but letters and digits before
//     "gitreceivepack" is looked for, so "/repo.git/GIT-RECEIVE-PACK/",
//     "git%2Dreceive-pack", "git%252dreceive-pack", "git-receive-pack;x"
//     and "?service=git-receive-pack" all count;
//   - a Content-Type naming x-git-receive-pack counts wherever the
//     request goes.
//
// A request that counts but is no push has its body read as ref updates
// and is refused when they do not parse, under a git_push rule only.
func IsReceivePack(method, path, rawQuery, contentType string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD":
		return false
	}
	if strings.Contains(squash(contentType), "xgitreceivepack") {
		return true
	}
	return strings.Contains(squash(path+"?"+rawQuery), "gitreceivepack")
}

// squash decodes s until it stops changing (at most a few rounds),
// leaving invalid escapes as they are, then keeps only its letters,
// lower-cased, and digits.
func squash(s string) string {
	for i := 0; i < 4; i++ {
		d := lenientUnescape(s)
		if d == s {
			break
		}
		s = d
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			b.WriteByte(c)
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		}
	}
	return b.String()
}

// lenientUnescape decodes each valid %XX of s and leaves the rest, as a
// forgiving server would.
func lenientUnescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && unhex(s[i+1]) >= 0 && unhex(s[i+2]) >= 0 {
			b = append(b, byte(unhex(s[i+1])<<4|unhex(s[i+2])))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
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
