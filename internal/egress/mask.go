package egress

import (
	"bytes"
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

func (r *replacer) replaceString(s string) string {
	if len(r.old) == 0 {
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
// that could be the start of an old string continued by input not read
// yet: that tail is returned, to be prefixed to the next input. With
// final, nothing is held back.
//
// It replaces leftmost match first and, at one position, the earliest
// pair (as strings.Replacer does, but ignoring ASCII case), so a stream
// masks exactly like the whole text would: a complete match is not taken
// while an old string that could still match from the same place or
// earlier needs more input.
func (r *replacer) process(dst, in []byte, final bool) (out, rest []byte) {
	for {
		at, which := r.index(in)
		if !final {
			if h := len(in) - r.heldTail(in); at < 0 || h <= at {
				return append(dst, in[:h]...), in[h:]
			}
		}
		if at < 0 {
			return append(dst, in...), nil
		}
		dst = append(dst, in[:at]...)
		dst = append(dst, r.new[which]...)
		in = in[at+len(r.old[which]):]
	}
}

// heldTail is the length of the longest suffix of b that is a proper
// prefix of some old string (ignoring ASCII case). Only such a suffix is
// held back, so a stream whose chunks end in ordinary text (an SSE
// event's blank line) is passed on at once.
func (r *replacer) heldTail(b []byte) int {
	best := 0
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

// maskReader masks a stream: every old string is replaced even when a
// read boundary splits it. It holds back at most the longest old string
// less one byte, and only bytes that could start one.
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
