package egress

import (
	"bytes"
	"encoding/binary"
	"io"
)

// replacer replaces fixed strings (secret values and their encoded
// forms) by others (their placeholders), over strings or as a stream.
// Matching ignores ASCII case: an upstream that upper-cases what it
// echoes is masked too.
type replacer struct {
	old, new [][]byte // old in ASCII lower case
	// first lists, by the lower-case byte an old string starts with, the
	// indexes of the old strings that do, in pair order; pairs has a bit
	// set for each (first, second) lower-case byte pair that starts one.
	// Every old string is at least two bytes long.
	first [256][]int
	pairs []uint64
	// starts are the bytes, in both cases, that an old string starts with.
	starts []byte
	// runs, when set, also finds parts of the secrets' values (see
	// runIndex); nil: whole old strings only.
	runs *runIndex
}

// newReplacer takes (old, new) pairs; when two olds start at the same
// place, the earlier pair wins, so callers list longer olds first. Olds
// shorter than two bytes are left out.
func newReplacer(pairs [][2]string) *replacer {
	r := &replacer{pairs: make([]uint64, 1<<16/64)}
	for _, p := range pairs {
		if len(p[0]) < 2 {
			continue
		}
		o := lowerASCII(nil, []byte(p[0]))
		r.first[o[0]] = append(r.first[o[0]], len(r.old))
		k := int(o[0])<<8 | int(o[1])
		r.pairs[k/64] |= 1 << (k % 64)
		r.old = append(r.old, o)
		r.new = append(r.new, []byte(p[1]))
	}
	for c := range 256 {
		if r.first[lower[c]] != nil {
			r.starts = append(r.starts, byte(c))
		}
	}
	return r
}

// newMasker is newReplacer over pairs that also replaces every run of at
// least runLen consecutive bytes of one of the values (value,
// placeholder pairs, longest value first) by that value's placeholder.
func newMasker(pairs, values [][2]string) *replacer {
	r := newReplacer(pairs)
	r.runs = newRunIndex(values)
	return r
}

// withPairs returns a replacer over extra pairs followed by r's, finding
// the same runs as r.
func (r *replacer) withPairs(extra, pairs [][2]string) *replacer {
	n := newReplacer(append(append([][2]string(nil), extra...), pairs...))
	n.runs = r.runs
	return n
}

func (r *replacer) replaceString(s string) string {
	if len(r.old) == 0 && r.runs == nil {
		return s
	}
	out, _ := r.process(nil, []byte(s), true)
	return string(out)
}

// index finds the leftmost place in b where an old string starts, in
// any ASCII case, and the earliest pair that matches there. With few
// distinct first bytes it jumps between their occurrences (IndexByte is
// vectorised); otherwise it looks at every byte.
func (r *replacer) index(b []byte) (at, which int) {
	if len(r.starts) > maxStarts {
		for i := range b {
			if w := r.matchAt(b, i); w >= 0 {
				return i, w
			}
		}
		return -1, -1
	}
	var next [maxStarts]int
	for k, c := range r.starts {
		next[k] = indexFrom(b, 0, c)
	}
	for {
		i := -1
		for k := range r.starts {
			if next[k] >= 0 && (i < 0 || next[k] < i) {
				i = next[k]
			}
		}
		if i < 0 {
			return -1, -1
		}
		if w := r.matchAt(b, i); w >= 0 {
			return i, w
		}
		for k, c := range r.starts {
			if next[k] == i {
				next[k] = indexFrom(b, i+1, c)
			}
		}
	}
}

// maxStarts bounds the distinct first bytes (in both cases) index jumps
// between.
const maxStarts = 16

func indexFrom(b []byte, from int, c byte) int {
	j := bytes.IndexByte(b[from:], c)
	if j < 0 {
		return -1
	}
	return from + j
}

// matchAt returns the earliest pair whose old string starts at b[i:], in
// any ASCII case, or -1.
func (r *replacer) matchAt(b []byte, i int) int {
	if i+1 >= len(b) {
		return -1
	}
	c0 := lower[b[i]]
	k := int(c0)<<8 | int(lower[b[i+1]])
	if r.pairs[k/64]&(1<<(k%64)) == 0 {
		return -1
	}
	for _, w := range r.first[c0] {
		if startsFold(b[i:], r.old[w]) {
			return w
		}
	}
	return -1
}

// process appends to dst the replaced form of in, except for a tail of in
// that could be the start of an old string or of a run continued by input
// not read yet: that tail is returned, to be prefixed to the next input.
// With final, nothing is held back.
//
// It replaces leftmost match first and, at one position, the earliest
// pair (as strings.Replacer does, but ignoring ASCII case), so a stream
// masks exactly like the whole text would: a complete match is not taken
// while an old string or a run that could still match from the same place
// or earlier needs more input. A run and an old string starting at the
// same place: the longer is taken, the old string when they are as long.
func (r *replacer) process(dst, in []byte, final bool) (out, rest []byte) {
	h := len(in)
	if !final {
		h -= r.heldTail(in)
	}
	// at1 (the leftmost old string at or after pos, which) and at2 (the
	// leftmost run, n2 bytes of value w2) stay valid while pos has not
	// passed them: -2 is not searched yet, -1 none up to the end.
	pos, at1, w1, at2, n2, w2 := 0, -2, 0, -2, 0, 0
	for {
		if at1 == -2 || at1 >= 0 && at1 < pos {
			if at1, w1 = r.index(in[pos:]); at1 >= 0 {
				at1 += pos
			}
		}
		if r.runs == nil {
			at2 = -1
		} else if at2 == -2 || at2 >= 0 && at2 < pos {
			at2, n2, w2 = r.runs.find(in, pos)
		}
		at, n, repl := at1, 0, []byte(nil)
		if at1 >= 0 {
			n, repl = len(r.old[w1]), r.new[w1]
		}
		if at2 >= 0 && (at1 < 0 || at2 < at1 || at2 == at1 && n2 > n) {
			at, n, repl = at2, n2, r.runs.phs[w2]
		}
		if at < 0 || at >= h {
			return append(dst, in[pos:h]...), in[h:]
		}
		dst = append(dst, in[pos:at]...)
		dst = append(dst, repl...)
		pos = at + n
		if pos > h {
			h = len(in) - r.heldTail(in[pos:])
		}
	}
}

// heldTail is the length of the longest suffix of b that is a proper
// prefix of some old string (ignoring ASCII case), or that more input
// could make or lengthen a run in. Only such a suffix is held back, so a
// stream whose chunks end in ordinary text (an SSE event's blank line) is
// passed on at once.
func (r *replacer) heldTail(b []byte) int {
	best := 0
	if r.runs != nil {
		best = r.runs.heldTail(b)
	}
	for _, o := range r.old {
		k := len(o) - 1
		if k > len(b) {
			k = len(b)
		}
		for ; k > best; k-- {
			if startsFold(o, b[len(b)-k:]) {
				best = k
				break
			}
		}
	}
	return best
}

// runLen is the fewest consecutive bytes of a secret's value that are
// masked on their own, wherever they appear: an upstream that quotes part
// of a credential it rejected ("first 24 bytes ... last 24 bytes") has
// each part of runLen bytes or more replaced by the placeholder, so at
// most runLen-1 bytes of the value pass per quoted part. Twelve bytes of
// a token (base64 or hex) are 48 to 72 bits: ordinary text does not
// contain them by chance, and they are longer than the fixed prefixes
// that token formats put before the random part (sk-proj-, ghp_,
// github_pat_, glpat-). A value of runLen bytes or fewer is masked whole
// only.
const runLen = 12

// runIndex finds runs: maximal stretches of text equal, ignoring ASCII
// case, to runLen or more consecutive bytes of one of the values.
type runIndex struct {
	vals [][]byte // lower case, longest first
	phs  [][]byte
	// grams lists, by the packed 8 bytes (see fold8) of each 8-byte window
	// of a value, where the windows with those bytes are; filter has a
	// bit set for the hash of each key.
	grams   map[uint64][]runPlace
	filter  []uint64
	shift   uint
	prefix  map[string]bool // lower-case prefixes, shorter than runLen, of the windows
	longest int
}

type runPlace struct{ v, o int32 }

const runHashMul = 0x9e3779b97f4a7c15

func newRunIndex(values [][2]string) *runIndex {
	x := &runIndex{grams: map[uint64][]runPlace{}, prefix: map[string]bool{}}
	for _, p := range values {
		if len(p[0]) <= runLen {
			continue
		}
		v := lowerASCII(nil, []byte(p[0]))
		for o := 0; o+8 <= len(v); o++ {
			k := fold8(v[o:])
			x.grams[k] = append(x.grams[k], runPlace{int32(len(x.vals)), int32(o)})
			for n := 1; n < runLen && o+runLen <= len(v); n++ {
				x.prefix[string(v[o:o+n])] = true
			}
		}
		x.vals = append(x.vals, v)
		x.phs = append(x.phs, []byte(p[1]))
		x.longest = max(x.longest, len(v))
	}
	if len(x.vals) == 0 {
		return nil
	}
	bits := uint(16)
	for 1<<bits < 32*len(x.grams) {
		bits++
	}
	x.shift = 64 - bits
	x.filter = make([]uint64, 1<<bits/64)
	for k := range x.grams {
		h := k * runHashMul >> x.shift
		x.filter[h/64] |= 1 << (h % 64)
	}
	return x
}

// fold8 packs the first 8 bytes of b, ASCII letters lowered (as lower
// does), first byte highest.
func fold8(b []byte) uint64 {
	const hi, ones = 0x8080808080808080, 0x0101010101010101
	w := binary.BigEndian.Uint64(b)
	t := w &^ hi
	ge := t + ones*(0x80-'A')   // high bit set where t >= 'A'
	gt := t + ones*(0x80-'Z'-1) // where t > 'Z'
	return w | (ge&^gt&^w&hi)>>2
}

// maybe reports whether some window's first 8 bytes could pack to key.
func (x *runIndex) maybe(key uint64) bool {
	h := key * runHashMul >> x.shift
	return x.filter[h/64]&(1<<(h%64)) != 0
}

// runStep is how many window starts one run's first runLen bytes hold
// 8-byte keys at: checking every runStep-th place finds every run.
const runStep = runLen - 8 + 1

// find returns the leftmost run in b at or after from: where it starts,
// its length and the value it is of; at is -1 when there is none. A run
// starting at s has the keys of s to s+runStep-1 in it, one of which
// find looks up; on a hit it tries each start that key could belong to.
func (x *runIndex) find(b []byte, from int) (at, n, which int) {
	for q := from + runStep - 1; q+8 <= len(b); q += runStep {
		if !x.maybe(fold8(b[q:])) {
			continue
		}
		for p := q - runStep + 1; p <= q && p+runLen <= len(b); p++ {
			if k := fold8(b[p:]); x.maybe(k) {
				if n, which, _ := x.match(b, p, k); n > 0 {
					return p, n, which
				}
			}
		}
	}
	return -1, 0, 0
}

// match returns the longest run starting at b[p:] (whose first 8 bytes,
// folded, are key), 0 for none, and the earliest value it is that long
// in; open reports whether a run reaches the end of b where its value
// goes on, so that more input would lengthen it.
func (x *runIndex) match(b []byte, p int, key uint64) (n, which int, open bool) {
	for _, at := range x.grams[key] {
		v := x.vals[at.v]
		k := 8
		for o := int(at.o); p+k < len(b) && o+k < len(v) && lower[b[p+k]] == v[o+k]; k++ {
		}
		if k < runLen {
			continue
		}
		if k > n {
			n, which = k, int(at.v)
		}
		if p+k == len(b) && int(at.o)+k < len(v) {
			open = true
		}
	}
	return n, which, open
}

// heldTail is the length of the longest suffix of b that more input could
// make a run of, or lengthen one in: a run reaching the end of b short of
// its value's end, or fewer than runLen bytes that start a window.
func (x *runIndex) heldTail(b []byte) int {
	var tmp [runLen]byte
	for p := max(0, len(b)-x.longest+1); p < len(b); p++ {
		if k := len(b) - p; k >= runLen {
			if _, _, open := x.match(b, p, fold8(b[p:])); open {
				return k
			}
		} else if x.prefix[string(lowerASCII(tmp[:0], b[p:]))] {
			return k
		}
	}
	return 0
}

// lower maps each byte to itself with ASCII letters lowered.
var lower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

// lowerASCII appends b with ASCII letters lowered to dst.
func lowerASCII(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, lower[c])
	}
	return dst
}

// startsFold reports whether b starts with prefix, ignoring ASCII case.
func startsFold(b, prefix []byte) bool {
	if len(prefix) > len(b) {
		return false
	}
	for i, c := range prefix {
		if lower[b[i]] != lower[c] {
			return false
		}
	}
	return true
}

// maskReader masks a stream: every old string and run is replaced even
// when a read boundary splits it. It holds back at most the longest old
// string or value less one byte, and only bytes that could start or
// lengthen one.
type maskReader struct {
	r      *replacer
	src    io.Reader
	buf    []byte // read from src
	in     []byte // unprocessed tail
	out    []byte // ready for the caller
	err    error
	closer io.Closer
	atEOF  func()
}

func newMaskReader(r *replacer, src io.ReadCloser, atEOF func()) *maskReader {
	return &maskReader{r: r, src: src, closer: src, buf: make([]byte, 32<<10), atEOF: atEOF}
}

func (m *maskReader) Read(p []byte) (int, error) {
	for {
		if len(m.out) > 0 {
			n := copy(p, m.out)
			m.out = m.out[n:]
			return n, nil
		}
		if m.err != nil {
			if m.in != nil {
				m.out, _ = m.r.process(m.out[:0], m.in, true)
				m.in = nil
				continue
			}
			if m.err == io.EOF && m.atEOF != nil {
				m.atEOF()
				m.atEOF = nil
			}
			return 0, m.err
		}
		n, err := m.src.Read(m.buf)
		m.err = err
		if n == 0 {
			continue
		}
		chunk := m.buf[:n]
		if len(m.in) > 0 {
			chunk = append(m.in, chunk...)
		}
		var rest []byte
		m.out, rest = m.r.process(m.out[:0], chunk, false)
		m.in = append([]byte(nil), rest...)
		if len(m.in) == 0 {
			m.in = nil
		}
	}
}

func (m *maskReader) Close() error { return m.closer.Close() }
