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
}

// newReplacer takes (old, new) pairs; when two olds start at the same
// place, the earlier pair wins, so callers list longer olds first.
func newReplacer(pairs [][2]string) *replacer {
	r := &replacer{}
	for _, p := range pairs {
		if p[0] == "" {
			continue
		}
		r.old = append(r.old, lowerASCII(nil, []byte(p[0])))
		r.new = append(r.new, []byte(p[1]))
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
	low := lowerASCII(nil, in)
	pos := 0
	for {
		at, which := -1, -1
		for i, o := range r.old {
			j := bytes.Index(low[pos:], o)
			if j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if !final {
			if h := len(in) - pos - r.heldTail(in[pos:]); at < 0 || h <= at {
				return append(dst, in[pos:pos+h]...), in[pos+h:]
			}
		}
		if at < 0 {
			return append(dst, in[pos:]...), nil
		}
		dst = append(dst, in[pos:pos+at]...)
		dst = append(dst, r.new[which]...)
		pos += at + len(r.old[which])
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
			if hasPrefixFold(o, b[len(b)-k:]) {
				best = k
				break
			}
		}
	}
	return best
}

// lowerASCII appends b with ASCII letters lowered to dst; the length is
// kept, so offsets in the result are offsets in b.
func lowerASCII(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// hasPrefixFold reports whether low (lower case) starts with b in any
// ASCII case.
func hasPrefixFold(low, b []byte) bool {
	if len(b) > len(low) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if low[i] != c {
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
