package match

// This file holds the previous implementation, as of commit 48c8e17,
// of every matcher policy/match replaced, copied unchanged but for
// names, so that differential tests can hold the new matchers to it:
//
//   - prevCompileMount, prevMatchElems, prevMatchAny, prevClassify,
//     prevHiddenBy, prevInMemory: internal/vfs/rules.go and
//     classify_export.go (the file server's mount rules);
//   - prevRefMatch: internal/egress/gitpush/commands.go's Match (the
//     engine's git push check), with its depth bound;
//   - prevCheckPathPattern, prevCheckRefPattern, prevMatchPath:
//     policy/request.go (what lang validated with, and what the engine
//     compiled and matched request paths with). CheckRequestPath moved
//     unchanged, so prevMatchPath calls it.
//
// None of it is used outside tests.

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// --- internal/vfs/rules.go at 48c8e17 ---

type prevPattern struct {
	src   string
	elems []string
}

func prevCompileMount(s string) (prevPattern, error) {
	p := prevPattern{src: s}
	switch {
	case s == "" || s == "/":
		return p, fmt.Errorf("empty pattern")
	case strings.HasPrefix(s, "!"):
		return p, fmt.Errorf("negated patterns are not supported")
	case strings.HasPrefix(s, "/"):
		return p, fmt.Errorf("absolute pattern; patterns are relative to the mount's root")
	case strings.ContainsRune(s, 0):
		return p, fmt.Errorf("NUL byte")
	}
	s = strings.TrimSuffix(s, "/")
	elems := strings.Split(s, "/")
	for _, e := range elems {
		switch e {
		case "", ".", "..":
			return p, fmt.Errorf("%q is not a clean relative pattern", p.src)
		}
		if e == "**" {
			continue
		}
		if _, err := path.Match(e, ""); err != nil {
			return p, err
		}
	}
	if len(elems) == 1 {
		elems = append([]string{"**"}, elems...)
	}
	p.elems = elems
	return p, nil
}

func (p prevPattern) literal() (string, bool) {
	if len(p.elems) > 1 && p.elems[0] == "**" && !strings.Contains(p.src, "/") {
		if hasMeta(p.elems[1]) {
			return "", false
		}
		return p.elems[1], true
	}
	for _, e := range p.elems {
		if hasMeta(e) {
			return "", false
		}
	}
	return strings.Join(p.elems, "/"), true
}

func prevMatchElems(pat, names []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return len(names) > 0
			}
			for i := 0; i <= len(names); i++ {
				if prevMatchElems(rest, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
}

func prevMatchAny(pats []prevPattern, names []string) (int, bool) {
	if len(pats) == 0 {
		return 0, false
	}
	for n := 1; n <= len(names); n++ {
		for _, p := range pats {
			if prevMatchElems(p.elems, names[:n]) {
				return n, true
			}
		}
	}
	return 0, false
}

type prevRules struct{ hide, readonly, tmpfs []prevPattern }

func prevCompileRules(hide, readonly, tmpfs []string) (*prevRules, error) {
	r := &prevRules{}
	for _, set := range []struct {
		src []string
		dst *[]prevPattern
	}{{hide, &r.hide}, {readonly, &r.readonly}, {tmpfs, &r.tmpfs}} {
		for _, s := range set.src {
			p, err := prevCompileMount(s)
			if err != nil {
				return nil, err
			}
			*set.dst = append(*set.dst, p)
		}
	}
	return r, nil
}

func prevSplit(rel string) []string {
	if rel == "" {
		return nil
	}
	return strings.Split(rel, "/")
}

func (r *prevRules) classify(rel string) Class {
	names := prevSplit(rel)
	if _, ok := prevMatchAny(r.hide, names); ok {
		return Hidden
	}
	if _, ok := prevMatchAny(r.readonly, names); ok {
		return ReadOnlyPath
	}
	if _, ok := prevMatchAny(r.tmpfs, names); ok {
		return TmpfsPath
	}
	return Plain
}

// inMemory is the tmpfs part of the previous Rules.place.
func (r *prevRules) inMemory(rel string) (string, bool) {
	names := prevSplit(rel)
	n, ok := prevMatchAny(r.tmpfs, names)
	if !ok {
		return "", false
	}
	return strings.Join(names[:n], "/"), true
}

func (r *prevRules) hiddenBy(rel string) []string {
	names := prevSplit(rel)
	var out []string
	for _, p := range r.hide {
		if len(names) > 0 && prevMatchElems(p.elems, names) {
			out = append(out, p.src)
		}
	}
	return out
}

func (r *prevRules) tmpfsLiterals() []string {
	var out []string
	for _, p := range r.tmpfs {
		if l, ok := p.literal(); ok {
			out = append(out, l)
		}
	}
	return out
}

// --- internal/egress/gitpush/commands.go at 48c8e17 ---

func prevRefMatch(patterns []string, ref string) bool {
	refParts := strings.Split(ref, "/")
	for _, p := range patterns {
		if prevMatchParts(strings.Split(p, "/"), refParts, 0) {
			return true
		}
	}
	return false
}

const prevMaxDepth = 64

func prevMatchParts(pat, ref []string, depth int) bool {
	if depth > prevMaxDepth {
		return false
	}
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(ref); i++ {
				if prevMatchParts(pat[1:], ref[i:], depth+1) {
					return true
				}
			}
			return false
		}
		if len(ref) == 0 || !prevMatchComponent(pat[0], ref[0]) {
			return false
		}
		pat, ref = pat[1:], ref[1:]
	}
	return len(ref) == 0
}

func prevMatchComponent(pat, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pat) && pat[px] == '*':
			starPx, starSx = px, sx
			px++
		case px < len(pat) && pat[px] == s[sx]:
			px++
			sx++
		case starPx >= 0:
			starSx++
			px, sx = starPx+1, starSx
		default:
			return false
		}
	}
	for px < len(pat) && pat[px] == '*' {
		px++
	}
	return px == len(pat)
}

// --- policy/request.go at 48c8e17 ---

func prevCheckPathPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty path pattern")
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path pattern %q must start with \"/\"", p)
	}
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return fmt.Errorf("path pattern %q holds %q", p, p[i])
	}
	if strings.Contains(p, "%") {
		return fmt.Errorf("path pattern %q holds \"%%\"", p)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f || r == '\\' {
			return fmt.Errorf("path pattern %q holds %q", p, r)
		}
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if err := prevCheckGlobSegment(s, i == len(segs)-1); err != nil {
			return fmt.Errorf("path pattern %q: %v", p, err)
		}
	}
	return nil
}

func prevCheckRefPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty ref pattern")
	}
	if !strings.HasPrefix(p, "refs/") {
		return fmt.Errorf("ref pattern %q must be a full ref name under refs/", p)
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f || strings.ContainsRune("~^:?[\\", r) {
			return fmt.Errorf("ref pattern %q holds %q", p, r)
		}
	}
	if strings.Contains(p, "..") || strings.Contains(p, "@{") {
		return fmt.Errorf("ref pattern %q holds \"..\" or \"@{\"", p)
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if err := prevCheckGlobSegment(s, false); err != nil {
			return fmt.Errorf("ref pattern %q: %v", p, err)
		}
		if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".lock") {
			return fmt.Errorf("ref pattern %q: component %q", p, s)
		}
	}
	if strings.HasSuffix(p, ".") {
		return fmt.Errorf("ref pattern %q ends with \".\"", p)
	}
	if len(segs) < 3 && !slices.Contains(segs, "**") {
		return fmt.Errorf("ref pattern %q names no ref", p)
	}
	return nil
}

func prevCheckGlobSegment(s string, last bool) error {
	switch {
	case s == "" && last:
		return nil
	case s == "":
		return fmt.Errorf("empty segment")
	case s == "." || s == "..":
		return fmt.Errorf("segment %q", s)
	case s == "**":
		return nil
	case strings.Contains(s, "**"):
		return fmt.Errorf("\"**\" must be a whole segment")
	}
	return nil
}

func prevMatchPath(pattern, p string) bool {
	if !strings.HasPrefix(pattern, "/") || CheckRequestPath(p) != nil {
		return false
	}
	raw := strings.Split(p[1:], "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		s, err := url.PathUnescape(r)
		if err != nil {
			return false
		}
		segs[i] = s
	}
	pat := strings.Split(pattern[1:], "/")
	if !prevMatchSegments(pat, segs) {
		return false
	}
	if hasEncodedSlash(p) {
		return prevMatchSegments(pat, strings.Split(strings.Join(segs, "/"), "/"))
	}
	return true
}

func prevMatchSegments(pat, segs []string) bool {
	ok := make([]bool, len(segs)+1)
	ok[len(segs)] = true
	next := make([]bool, len(segs)+1)
	for i := len(pat) - 1; i >= 0; i-- {
		cur := next
		if pat[i] == "**" {
			cur[len(segs)] = ok[len(segs)]
			for j := len(segs) - 1; j >= 0; j-- {
				cur[j] = ok[j] || cur[j+1]
			}
		} else {
			cur[len(segs)] = false
			for j := len(segs) - 1; j >= 0; j-- {
				cur[j] = ok[j+1] && prevMatchGlob(pat[i], segs[j])
			}
		}
		ok, next = cur, ok
	}
	return ok[0]
}

func prevMatchGlob(pat, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pat) && pat[p] == '*':
			star, mark = p, i
			p++
		case p < len(pat) && pat[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}
