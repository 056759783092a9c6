package termtext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is what a guest that wants to fool the person reading sbx's
// output sends: an OSC that sets the terminal's title, a colour, a
// carriage return that overwrites the line, a bidi override and a fake
// plan line.
const hostile = "boom\x1b]0;pwned\x07 \x1b[31mred\r\u202egnp.exe\n  + sandbox.evil will be created\x9b2J\xff"

// unsafe reports the first byte or rune in s a terminal would act on.
func unsafe(s string, allowNewline, allowTab bool) (rune, bool) {
	if !utf8.ValidString(s) {
		return utf8.RuneError, true
	}
	for _, r := range s {
		switch {
		case r == '\n' && allowNewline, r == '\t' && allowTab:
		case needsEscape(r):
			return r, true
		}
	}
	return 0, false
}

func TestLine(t *testing.T) {
	got := Line(hostile)
	want := `boom\x1b]0;pwned\x07 \x1b[31mred\r\u202egnp.exe\n  + sandbox.evil will be created\x9b2J\xff`
	if got != want {
		t.Errorf("Line =\n%s\nwant\n%s", got, want)
	}
	if r, bad := unsafe(got, false, false); bad {
		t.Errorf("Line left %U in %q", r, got)
	}
	for _, s := range []string{"", "plain text", `C:\path`, "naïve — 日本", "exit status 1"} {
		if Line(s) != s {
			t.Errorf("Line(%q) = %q; printable text must stay as it is", s, Line(s))
		}
	}
	if got := Line("a\tb\u200bc\u2028\U000e0001"); got != `a\tb\u200bc\u2028\U000e0001` {
		t.Errorf("Line = %q", got)
	}
}

func TestBlock(t *testing.T) {
	got := Block(hostile+"\r\nlast\tline\n", "  | ")
	for i, l := range strings.Split(got, "\n") {
		if i > 0 && !strings.HasPrefix(l, "  | ") {
			t.Errorf("line %d %q lacks the prefix", i, l)
		}
	}
	if strings.Contains(got, "\n  + sandbox.evil") || strings.ContainsRune(got, 0x1b) {
		t.Errorf("Block = %q", got)
	}
	if r, bad := unsafe(got, true, true); bad {
		t.Errorf("Block left %U in %q", r, got)
	}
	if !strings.HasSuffix(got, "\n  | last\tline") {
		t.Errorf("Block = %q; want tabs kept, the CRLF a line break and the trailing break dropped", got)
	}
	if got := Block("one line", "> "); got != "one line" {
		t.Errorf("Block(one line) = %q", got)
	}
}

func TestWriter(t *testing.T) {
	in := "kernel: ok\r\n" + hostile + "\nnaïve 日本\n"
	want := "kernel: ok\r\n" + Block(hostile, "") + "\nnaïve 日本\n"
	// Every split of the input into two writes gives the same output:
	// runes and CRLFs cut in two are put back together.
	for cut := range len(in) + 1 {
		var out bytes.Buffer
		w := NewWriter(&out)
		for _, part := range []string{in[:cut], in[cut:]} {
			if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("cut at %d: wrote\n%q\nwant\n%q", cut, out.String(), want)
		}
	}
	var out bytes.Buffer
	w := NewWriter(&out)
	w.Write([]byte("end \xe6\x97"))
	w.Flush()
	if out.String() != `end \xe6\x97` {
		t.Errorf("a truncated rune at the end: %q", out.String())
	}
}
