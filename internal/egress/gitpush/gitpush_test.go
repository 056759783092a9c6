package gitpush

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// capturedPush is the start of a body git 2.39 sent for
// `git push origin main main:refs/heads/agent/x main:refs/tags/v1`
// (recorded by TestParseRealPushes), followed by the start of a pack.
const capturedPush = "00af5ce6fd266299a48840205d8e9394ed11a66e285f ce9a54d8b502bbce89842ad0c5810e1795770247 refs/heads/main\x00 report-status-v2 side-band-64k quiet object-format=sha1 agent=git/2.39.5" +
	"00680000000000000000000000000000000000000000 ce9a54d8b502bbce89842ad0c5810e1795770247 refs/heads/agent/x" +
	"00620000000000000000000000000000000000000000 ce9a54d8b502bbce89842ad0c5810e1795770247 refs/tags/v1" +
	"0000"

func TestParseCapturedBody(t *testing.T) {
	r := strings.NewReader(capturedPush + "PACK\x00\x00\x00\x02rest")
	cmds, consumed, caps, err := ParseCommands(r, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if string(consumed) != capturedPush {
		t.Errorf("consumed %q", consumed)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "PACK\x00\x00\x00\x02rest" {
		t.Errorf("read past the commands: rest %q", rest)
	}
	want := []Command{
		{"5ce6fd266299a48840205d8e9394ed11a66e285f", "ce9a54d8b502bbce89842ad0c5810e1795770247", "refs/heads/main"},
		{"0000000000000000000000000000000000000000", "ce9a54d8b502bbce89842ad0c5810e1795770247", "refs/heads/agent/x"},
		{"0000000000000000000000000000000000000000", "ce9a54d8b502bbce89842ad0c5810e1795770247", "refs/tags/v1"},
	}
	if len(cmds) != len(want) {
		t.Fatalf("cmds %+v", cmds)
	}
	for i := range want {
		if cmds[i] != want[i] {
			t.Errorf("cmd %d: %+v", i, cmds[i])
		}
	}
	if strings.Join(caps, " ") != "report-status-v2 side-band-64k quiet object-format=sha1 agent=git/2.39.5" {
		t.Errorf("caps %q", caps)
	}
	// The limit is honoured exactly.
	if _, consumed, _, err := ParseCommands(strings.NewReader(capturedPush), len(capturedPush)-1); err == nil || len(consumed) > len(capturedPush)-1 {
		t.Errorf("limit one short: err %v, consumed %d", err, len(consumed))
	}
	if _, _, _, err := ParseCommands(strings.NewReader(capturedPush), len(capturedPush)); err != nil {
		t.Errorf("limit exact: %v", err)
	}
}

func pkt(s string) string {
	return hex4(len(s)+4) + s
}

func hex4(n int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[n>>12&15], digits[n>>8&15], digits[n>>4&15], digits[n&15]})
}

var (
	id1  = strings.Repeat("a", 40)
	id2  = strings.Repeat("b", 40)
	zero = strings.Repeat("0", 40)
)

func TestParseShallowAndSHA256(t *testing.T) {
	s1, s2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	body := pkt("shallow "+id1) + pkt(s1+" "+s2+" refs/heads/a\x00report-status object-format=sha256\n") + "0000"
	cmds, _, caps, err := ParseCommands(strings.NewReader(body), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 1 || cmds[0] != (Command{s1, s2, "refs/heads/a"}) || len(caps) != 2 {
		t.Errorf("cmds %+v caps %v", cmds, caps)
	}
}

func TestParseMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"empty":                "",
		"flush only":           "0000",
		"no flush":             pkt(id1 + " " + id2 + " refs/heads/a\x00report-status"),
		"short length":         "00",
		"non-hex length":       "00zz",
		"signed length":        "+0ff",
		"length 1..4":          "0001",
		"length 4 (empty pkt)": "0004",
		"length past body":     "00ff" + id1,
		"two fields":           pkt(id1+" refs/heads/a") + "0000",
		"four fields":          pkt(id1+" "+id2+" refs/heads/a x") + "0000",
		"short id":             pkt(id1[:39]+" "+id2+" refs/heads/a") + "0000",
		"upper-case id":        pkt(strings.ToUpper(id1)+" "+id2+" refs/heads/a") + "0000",
		"mixed id lengths":     pkt(id1+" "+strings.Repeat("b", 64)+" refs/heads/a") + "0000",
		"both zero":            pkt(zero+" "+zero+" refs/heads/a") + "0000",
		"ref outside refs/":    pkt(id1+" "+id2+" HEAD") + "0000",
		"ref with ..":          pkt(id1+" "+id2+" refs/heads/agent/../main") + "0000",
		"ref with //":          pkt(id1+" "+id2+" refs/heads//main") + "0000",
		"ref with control":     pkt(id1+" "+id2+" refs/heads/a\x01b") + "0000",
		"ref .lock":            pkt(id1+" "+id2+" refs/heads/a.lock") + "0000",
		"ref glob":             pkt(id1+" "+id2+" refs/heads/*") + "0000",
		"ref dot component":    pkt(id1+" "+id2+" refs/heads/.hidden") + "0000",
		"NUL in later command": pkt(id1+" "+id2+" refs/heads/a") + pkt(id1+" "+id2+" refs/heads/b\x00caps") + "0000",
		"push-cert":            pkt("push-cert\x00report-status") + pkt("certificate version 0.1") + "0000",
		"bad shallow":          pkt("shallow xyz") + pkt(id1+" "+id2+" refs/heads/a") + "0000",
		"delim pkt":            pkt(id1+" "+id2+" refs/heads/a") + "0001",
	} {
		cmds, consumed, _, err := ParseCommands(strings.NewReader(body), 1<<16)
		if err == nil {
			t.Errorf("%s: accepted, cmds %+v", name, cmds)
		}
		if !strings.HasPrefix(body, string(consumed)) {
			t.Errorf("%s: consumed %q is not a prefix of the body", name, consumed)
		}
	}
}

func TestParseLimit(t *testing.T) {
	var b strings.Builder
	for range 1000 {
		b.WriteString(pkt(id1 + " " + id2 + " refs/heads/agent/some-branch-name\n"))
	}
	b.WriteString("0000")
	_, consumed, _, err := ParseCommands(strings.NewReader(b.String()), 8192)
	if err == nil || len(consumed) > 8192 {
		t.Fatalf("err %v, consumed %d of limit 8192", err, len(consumed))
	}
	// A huge announced length is refused before anything is read for it.
	r := &countingReader{r: strings.NewReader(pkt(id1+" "+id2+" refs/heads/a") + "fff0" + strings.Repeat("x", 70000))}
	_, consumed, _, err = ParseCommands(r, 1000)
	if err == nil || len(consumed) > 1000 || r.n > 1000 {
		t.Fatalf("err %v, consumed %d, read %d of limit 1000", err, len(consumed), r.n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(pkt(id1+" "+id2+" refs/heads/a")), &errReader{boom})
	if _, _, _, err := ParseCommands(r, 4096); !errors.Is(err, boom) {
		t.Errorf("err %v", err)
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// parsePkts splits a pkt-line stream, returning each payload (flushes as
// "FLUSH").
func parsePkts(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("trailing %q", b)
		}
		var n int
		for _, c := range b[:4] {
			n = n*16 + strings.IndexByte("0123456789abcdef", c)
		}
		if n == 0 {
			out = append(out, "FLUSH")
			b = b[4:]
			continue
		}
		if n < 4 || n > len(b) {
			t.Fatalf("bad length %d in %q", n, b)
		}
		out = append(out, string(b[4:n]))
		b = b[n:]
	}
	return out
}

func TestRejectFraming(t *testing.T) {
	cmds := []Command{{zero, id1, "refs/heads/main"}, {id1, id2, "refs/heads/x"}}
	reason := "not allowed\n\x1b[31mby rule\t(sbx.hcl:3)"
	clean := "not allowed \\x1b[31mby rule (sbx.hcl:3)"

	// report-status without side-band: the status pkt-lines themselves.
	w := httptest.NewRecorder()
	if err := Reject(w, cmds, []string{"report-status"}, reason); err != nil {
		t.Fatal(err)
	}
	if ct := w.Header().Get("Content-Type"); ct != ContentTypeResult {
		t.Errorf("content type %q", ct)
	}
	got := parsePkts(t, w.Body.Bytes())
	want := []string{"unpack ok\n", "ng refs/heads/main " + clean + "\n", "ng refs/heads/x " + clean + "\n", "FLUSH"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}

	// side-band-64k: the same report inside band 1, a message on band 2.
	w = httptest.NewRecorder()
	if err := Reject(w, cmds, []string{"report-status-v2", "side-band-64k"}, reason); err != nil {
		t.Fatal(err)
	}
	outer := parsePkts(t, w.Body.Bytes())
	var band1 bytes.Buffer
	var band2 string
	for _, p := range outer[:len(outer)-1] {
		switch p[0] {
		case 1:
			band1.WriteString(p[1:])
		case 2:
			band2 += p[1:]
		default:
			t.Errorf("band %d", p[0])
		}
	}
	if outer[len(outer)-1] != "FLUSH" {
		t.Error("no final flush")
	}
	if inner := parsePkts(t, band1.Bytes()); strings.Join(inner, "|") != strings.Join(want, "|") {
		t.Errorf("band 1 %q", inner)
	}
	if !strings.Contains(band2, clean) {
		t.Errorf("band 2 %q", band2)
	}

	// Neither: a plain 403.
	w = httptest.NewRecorder()
	if err := Reject(w, cmds, nil, reason); err != nil {
		t.Fatal(err)
	}
	if w.Code != 403 || !strings.Contains(w.Body.String(), clean) {
		t.Errorf("code %d body %q", w.Code, w.Body.String())
	}
	// Side-band without report-status: a fatal message on band 3.
	w = httptest.NewRecorder()
	if err := Reject(w, cmds, []string{"side-band-64k"}, reason); err != nil {
		t.Fatal(err)
	}
	if p := parsePkts(t, w.Body.Bytes()); len(p) != 1 || p[0][0] != 3 || !strings.Contains(p[0], clean) {
		t.Errorf("band 3: %q", p)
	}

	// A long reason is bounded.
	w = httptest.NewRecorder()
	Reject(w, cmds, []string{"report-status"}, strings.Repeat("x", 100000))
	if w.Body.Len() > 4*maxReason {
		t.Errorf("response %d bytes", w.Body.Len())
	}
}

func FuzzParseCommands(f *testing.F) {
	f.Add([]byte(capturedPush), 4096)
	f.Add([]byte(capturedPush), 200)
	f.Add([]byte(pkt("shallow "+id1)+pkt(id1+" "+id2+" refs/heads/a\x00x")+"0000"), 1000)
	f.Add([]byte("0000"), 10)
	f.Add([]byte("fff0"), 100000)
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		r := &countingReader{r: bytes.NewReader(body)}
		cmds, consumed, _, err := ParseCommands(r, limit)
		if len(consumed) > limit {
			t.Fatalf("consumed %d past limit %d", len(consumed), limit)
		}
		if r.n != len(consumed) {
			t.Fatalf("read %d bytes, returned %d", r.n, len(consumed))
		}
		if !bytes.HasPrefix(body, consumed) {
			t.Fatal("consumed is not a prefix of the body")
		}
		if err == nil {
			if len(cmds) == 0 || !bytes.HasSuffix(consumed, []byte("0000")) {
				t.Fatalf("success with %d commands, consumed %q", len(cmds), consumed)
			}
			for _, c := range cmds {
				if !validRef(c.Ref) || !validID(c.Old) || !validID(c.New) {
					t.Fatalf("invalid command accepted: %+v", c)
				}
			}
		}
	})
}
