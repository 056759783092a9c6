package egress

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkedReader returns src in reads of the given sizes, then the rest.
type chunkedReader struct {
	src   []byte
	sizes []int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := len(c.src)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[0])
		c.sizes = c.sizes[1:]
	}
	n = min(n, len(p))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

func maskAll(t testing.TB, r *replacer, src []byte, sizes []int) string {
	t.Helper()
	m := newMaskReader(r, io.NopCloser(&chunkedReader{src: src, sizes: sizes}), nil)
	out, err := io.ReadAll(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestMaskReaderAcrossBoundaries(t *testing.T) {
	r := newReplacer([][2]string{{"SECRETVALUE1", "<a>"}, {"SECRET", "<b>"}, {"overlapover", "<c>"}})
	in := "x SECRETVALUE1 y SECRET z SECRETVALUE SECRETVALUE1SECRETVALUE1 overoverlapover end SECR"
	want := r.replaceString(in)
	if want != "x <a> y <b> z <b>VALUE <a><a> over<c> end SECR" {
		t.Fatalf("replaceString: %q", want)
	}
	// Every split into two reads, then random splits.
	for i := 0; i <= len(in); i++ {
		if got := maskAll(t, r, []byte(in), []int{i}); got != want {
			t.Fatalf("split at %d: %q", i, got)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 2000; n++ {
		var sizes []int
		for s := 0; s < len(in); {
			k := 1 + rng.IntN(7)
			sizes = append(sizes, k)
			s += k
		}
		if got := maskAll(t, r, []byte(in), sizes); got != want {
			t.Fatalf("sizes %v: %q", sizes, got)
		}
	}
	// One byte at a time through a reader that also returns data with EOF.
	m := newMaskReader(r, io.NopCloser(iotest.DataErrReader(iotest.OneByteReader(strings.NewReader(in)))), nil)
	if got, err := io.ReadAll(m); err != nil || string(got) != want {
		t.Fatalf("one byte at a time: %q %v", got, err)
	}
}

// TestMaskReaderHoldsOnlyPossiblePrefixes checks that a read ending in
// text that cannot start a value is passed on whole, so streams are not
// delayed, while a possible start is held.
func TestMaskReaderHoldsOnlyPossiblePrefixes(t *testing.T) {
	r := newReplacer([][2]string{{"tok-123456789", "ph"}})
	out, rest := r.process(nil, []byte("data: x\n\n"), false)
	if string(out) != "data: x\n\n" || len(rest) != 0 {
		t.Errorf("out %q rest %q", out, rest)
	}
	out, rest = r.process(nil, []byte("data: tok-12"), false)
	if string(out) != "data: " || string(rest) != "tok-12" {
		t.Errorf("out %q rest %q", out, rest)
	}
}

func FuzzMaskReader(f *testing.F) {
	f.Add([]byte("hello SECRET-VALUE world"), uint8(3))
	f.Add([]byte("SECRET-VALUSECRET-VALUE"), uint8(1))
	f.Add([]byte("x SECRET-VALUE-01 -VALUE-0123456789 secret-value-0123456789"), uint8(4))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		r := newReplacer([][2]string{{"SECRET-VALUE", "PH"}, {"SECRET", "P2"}})
		want := r.replaceString(string(in))
		var sizes []int
		for s := 0; s < len(in); s += int(step%16) + 1 {
			sizes = append(sizes, int(step%16)+1)
		}
		got := maskAll(t, r, in, sizes)
		if got != want {
			t.Fatalf("streamed %q, whole %q", got, want)
		}
		if bytes.Contains([]byte(got), []byte("SECRET")) && !bytes.Contains(in, []byte("SECRE")) {
			t.Fatalf("value in output %q", got)
		}
		// With runs of the value masked too.
		m := newMasker([][2]string{{"SECRET-VALUE-0123456789", "PH"}, {"SECRET", "P2"}}, [][2]string{{"SECRET-VALUE-0123456789", "PH"}})
		if got, want := maskAll(t, m, in, sizes), m.replaceString(string(in)); got != want {
			t.Fatalf("with runs: streamed %q, whole %q", got, want)
		}
	})
}

func BenchmarkMaskReader(b *testing.B) {
	r := newMasker([][2]string{{tokenValue, tokenPH}}, [][2]string{{tokenValue, tokenPH}})
	data := bytes.Repeat([]byte("some ordinary response text, JSON and such {\"a\":1}\n"), 1<<14)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		m := newMaskReader(r, io.NopCloser(bytes.NewReader(data)), nil)
		io.Copy(io.Discard, m)
	}
}

// TestReplacerIgnoresCase checks that masking matches in any ASCII case,
// across read boundaries, and otherwise replaces as strings.Replacer
// does (leftmost first; at one place, the earliest pair).
func TestReplacerIgnoresCase(t *testing.T) {
	pairs := [][2]string{{"secret-value", "<a>"}, {"secret", "<b>"}, {"lapover", "<c>"}}
	r := newReplacer(pairs)
	in := "x SECRET-Value y sEcReT z overLAPover SECR"
	want := "x <a> y <b> z over<c> SECR"
	if got := r.replaceString(in); got != want {
		t.Fatalf("replaceString: %q", got)
	}
	for i := 0; i <= len(in); i++ {
		if got := maskAll(t, r, []byte(in), []int{i}); got != want {
			t.Fatalf("split at %d: %q", i, got)
		}
	}
	// Against strings.Replacer on lower-case text drawn from a small
	// alphabet, so that matches and near-matches are frequent.
	var args []string
	for _, p := range pairs {
		args = append(args, p[0], p[1])
	}
	ref := strings.NewReplacer(args...)
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "secrt-valuop "
	for n := 0; n < 5000; n++ {
		b := make([]byte, rng.IntN(60))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if got, want := r.replaceString(string(b)), ref.Replace(string(b)); got != want {
			t.Fatalf("%q: got %q, strings.Replacer %q", b, got, want)
		}
		if got, want := r.replaceString(strings.ToUpper(string(b))), ref.Replace(string(b)); !strings.EqualFold(got, want) {
			t.Fatalf("%q upper-cased: got %q, want %q", b, got, want)
		}
	}
}
