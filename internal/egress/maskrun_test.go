package egress

import (
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// TestMaskRunsAtBoundaries checks that every run of runLen or more bytes
// of a value is masked, in any case, at the start and the end of a
// stream and however reads split it, while a part shorter than runLen
// passes.
func TestMaskRunsAtBoundaries(t *testing.T) {
	v := keyValue
	r := newMasker([][2]string{{v, "PH"}}, [][2]string{{v, "PH"}})
	short := v[5 : 5+runLen-1]
	in := v[:24] + " first, last " + strings.ToUpper(v[len(v)-24:]) + " whole " + v +
		" run " + v[3:3+runLen] + " short " + short + " twice " + v[:20] + v[:20] + " end " + v[len(v)-runLen:]
	want := "PH first, last PH whole PH run PH short " + short + " twice PHPH end PH"
	if got := r.replaceString(in); got != want {
		t.Fatalf("replaceString:\n got %q\nwant %q", got, want)
	}
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j += 7 {
			if got := maskAll(t, r, []byte(in), []int{i, j - i}); got != want {
				t.Fatalf("split at %d, %d: %q", i, j, got)
			}
		}
	}
	m := newMaskReader(r, io.NopCloser(iotest.DataErrReader(iotest.OneByteReader(strings.NewReader(in)))), nil)
	if got, err := io.ReadAll(m); err != nil || string(got) != want {
		t.Fatalf("one byte at a time: %q %v", got, err)
	}
	// A read that ends inside a run is held from the run's start; one
	// that ends in bytes no value has is passed on whole.
	out, rest := r.process(nil, []byte("x: "+v[:15]), false)
	if string(out) != "x: " || string(rest) != v[:15] {
		t.Errorf("out %q rest %q", out, rest)
	}
	out, rest = r.process(nil, []byte("x: "+v[:15]+"\n"), false)
	if string(out) != "x: PH\n" || len(rest) != 0 {
		t.Errorf("out %q rest %q", out, rest)
	}
}

// naiveMask is what process does, the slow way: at each place from the
// left, the longest run or the first whole pair, the pair when as long.
func naiveMask(s string, pairs, values [][2]string) string {
	ls := strings.ToLower(s)
	var out strings.Builder
	for i := 0; i < len(s); {
		n1, w1 := 0, -1
		for j, p := range pairs {
			if strings.HasPrefix(ls[i:], strings.ToLower(p[0])) {
				n1, w1 = len(p[0]), j
				break
			}
		}
		n2, w2 := 0, -1
		for j, p := range values {
			lv := strings.ToLower(p[0])
			if len(lv) <= runLen {
				continue
			}
			for o := range lv {
				k := 0
				for i+k < len(ls) && o+k < len(lv) && ls[i+k] == lv[o+k] {
					k++
				}
				if k >= runLen && k > n2 {
					n2, w2 = k, j
				}
			}
		}
		switch {
		case w2 >= 0 && n2 > n1:
			out.WriteString(values[w2][1])
			i += n2
		case w1 >= 0:
			out.WriteString(pairs[w1][1])
			i += n1
		default:
			out.WriteByte(s[i])
			i++
		}
	}
	return out.String()
}

// TestMaskRunsMatchNaive compares masking, whole and streamed, with
// naiveMask on text made of pieces of two values that share bytes, their
// encoded forms and noise, so that runs meet, overlap and end at reads.
func TestMaskRunsMatchNaive(t *testing.T) {
	va, vb := "abcabcabdabXYabcabcab-0123", "xyzabcabdabXYz0123456789"
	values := [][2]string{{va, "<A>"}, {vb, "<B>"}}
	pairs := [][2]string{{"YWJjYWJjYWJkYWJYWWFiY2FiY2FiLTAxMjM", "<a64>"}, {va, "<A>"}, {vb, "<B>"}, {"abcab", "<short>"}}
	r := newMasker(pairs, values)
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{va, vb, pairs[0][0], "abc", "XY", " ", "-", "0123"}
	hits := 0 // inputs where a value was masked
	for n := 0; n < 3000; n++ {
		var b strings.Builder
		for k := rng.IntN(8); k >= 0; k-- {
			p := pieces[rng.IntN(len(pieces))]
			i := rng.IntN(len(p))
			p = p[i : i+rng.IntN(len(p)-i+1)]
			if rng.IntN(3) == 0 {
				p = strings.ToUpper(p)
			}
			b.WriteString(p)
		}
		in := b.String()
		want := naiveMask(in, pairs, values)
		if strings.Contains(want, "<A>") || strings.Contains(want, "<B>") {
			hits++
		}
		if got := r.replaceString(in); got != want {
			t.Fatalf("%q:\n got %q\nwant %q", in, got, want)
		}
		var sizes []int
		for s := 0; s < len(in); {
			k := 1 + rng.IntN(12)
			sizes = append(sizes, k)
			s += k
		}
		if got := maskAll(t, r, []byte(in), sizes); got != want {
			t.Fatalf("%q in reads of %v:\n got %q\nwant %q", in, sizes, got, want)
		}
	}
	if hits < 300 {
		t.Fatalf("only %d inputs of 3000 had a value masked", hits)
	}
}
