package egress

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"
)

// TestRejectedCredentialQuotedInParts plays a guest that makes the
// upstream reject a whole, correctly substituted value: the placeholder
// as a Basic password beside a user name the upstream does not accept.
// The upstream quotes the first and last 24 bytes of the password it was
// sent, in the body, a header and (over HTTP/2) a trailer: together the
// whole 40-byte value. Each quote is a run of the value and reaches the
// guest as the placeholder.
func TestRejectedCredentialQuotedInParts(t *testing.T) {
	h, _ := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if ok && user == "__token__" && pass == keyValue {
			fmt.Fprint(w, "ok")
			return
		}
		first, last := pass[:min(24, len(pass))], pass[max(0, len(pass)-24):]
		w.Header().Set("Trailer", "X-Last")
		w.Header().Set("X-First", first)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "bad credential for %s: first=%s last=%s\n", user, first, last)
		w.Header().Set("X-Last", last)
	})
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		req := mustRequest(t, "GET", "https://api.test/v1/upload", "")
		req.SetBasicAuth("__token__", keyPH)
		if res, body := do(t, c, req); res.StatusCode != 200 || body != "ok" {
			t.Fatalf("h2=%v: the right user gets %d %q", h2, res.StatusCode, body)
		}
		req = mustRequest(t, "GET", "https://api.test/v1/upload", "")
		req.SetBasicAuth("not-the-user", keyPH)
		res, body := do(t, c, req)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("h2=%v: status %d", h2, res.StatusCode)
		}
		got := body + res.Header.Get("X-First") + " " + res.Trailer.Get("X-Last")
		if run := valueRun(got, keyValue, runLen); run != "" {
			t.Errorf("h2=%v: the guest got %q, which holds %q of the value", h2, got, run)
		}
		if want := "bad credential for not-the-user: first=" + keyPH + " last=" + keyPH + "\n"; body != want {
			t.Errorf("h2=%v: body %q, want %q", h2, body, want)
		}
		if res.Header.Get("X-First") != keyPH || h2 && res.Trailer.Get("X-Last") != keyPH {
			t.Errorf("h2=%v: header %q, trailer %q, want the placeholder", h2, res.Header.Get("X-First"), res.Trailer.Get("X-Last"))
		}
	}
}

// utf16le encodes s as UTF-16, little end first.
func utf16le(s string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	return b.String()
}

// TestEchoInOtherCharsetRefused plays a guest that asks for the echo of
// its credential in UTF-16, which the masker would not recognise: by a
// charset parameter of Accept (as JAX-RS frameworks honour) and by
// Accept-Charset, to an upstream that answers in the charset asked for;
// and an upstream that answers in UTF-16 or EBCDIC whatever it is asked.
// Neither header reaches the secret's host, and a response from there
// declaring a charset that does not encode ASCII as ASCII is refused.
func TestEchoInOtherCharsetRefused(t *testing.T) {
	h, rec := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
		cs := r.Header.Get("X-Answer-In") // a charset to answer in regardless
		if cs == "" {
			for _, a := range append(r.Header.Values("Accept"), r.Header.Values("Accept-Charset")...) {
				if strings.Contains(strings.ToLower(a), "utf-16") {
					cs = "utf-16le"
				}
			}
		}
		echo := "echo: " + r.Header.Get("Authorization")
		if cs == "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, echo)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset="+cs)
		fmt.Fprint(w, utf16le(echo))
	})
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		for _, hdr := range [][2]string{
			{"Accept", "text/plain; charset=utf-16le"},
			{"Accept", "application/json;q=0.9, text/plain;charset=\"UTF-16LE\";q=1"},
			{"Accept-Charset", "utf-16le"},
		} {
			req := mustRequest(t, "GET", "https://api.test/v1/echo", "")
			req.Header.Set("Authorization", "Bearer "+keyPH)
			req.Header.Set(hdr[0], hdr[1])
			res, body := do(t, c, req)
			if res.StatusCode != 200 || body != "echo: Bearer "+keyPH {
				t.Errorf("h2=%v %s: %q: %d %q, want the echo in UTF-8, masked", h2, hdr[0], hdr[1], res.StatusCode, body)
			}
		}
		for _, cs := range []string{"utf-16le", "UTF-16", "utf-32be", "ucs-2", "cp037", "IBM1047", "utf-7"} {
			req := mustRequest(t, "GET", "https://api.test/v1/echo", "")
			req.Header.Set("Authorization", "Bearer "+keyPH)
			req.Header.Set("X-Answer-In", cs)
			res, body := do(t, c, req)
			if res.StatusCode != http.StatusBadGateway || strings.Contains(body, utf16le(keyValue[:runLen])) {
				t.Errorf("h2=%v: an answer in %s: %d %q, want a 502", h2, cs, res.StatusCode, body)
			}
		}
	}
	for _, r := range rec.all() {
		for _, line := range strings.Split(r, "\n") {
			if l := strings.ToLower(line); strings.HasPrefix(l, "accept-charset:") || strings.HasPrefix(l, "accept:") && strings.Contains(l, "charset") {
				t.Errorf("the upstream was asked for a charset: %q", line)
			}
		}
	}
}

func TestCharsetChecks(t *testing.T) {
	for cs, want := range map[string]bool{
		"utf-8": true, "UTF8": true, "us-ascii": true, "ISO-8859-1": true, "iso-8859-15": true, "windows-1252": true, "latin1": true,
		"utf-16": false, "UTF-16LE": false, "utf-16be": false, "utf-32": false, "ucs-2": false, "utf-7": false,
		"cp037": false, "ibm1047": false, "ebcdic-us": false, "iso-8859-": false, "windows-1259": false, "x-unknown": false,
	} {
		if got := asciiCompatible(cs); got != want {
			t.Errorf("asciiCompatible(%q) = %v", cs, got)
		}
	}
	h := http.Header{"Accept": {`text/plain; charset=utf-16le;q=0.9, application/json;Charset="utf-32"`, "text/html"}, "Accept-Charset": {"utf-16"}}
	dropCharsetAsks(h)
	if got := h.Values("Accept"); len(got) != 2 || got[0] != "text/plain;q=0.9, application/json" || got[1] != "text/html" || h.Get("Accept-Charset") != "" {
		t.Errorf("after dropCharsetAsks: %q", h)
	}
	for v, want := range map[string]string{"text/plain": "", "text/plain; charset=UTF-8": "", "text/plain; charset=utf-16": "utf-16", "text/plain; charset=a; charset=b": "text/plain; charset=a; charset=b"} {
		if got := unmaskableCharset(http.Header{"Content-Type": {v}}); got != want {
			t.Errorf("unmaskableCharset(%q) = %q, want %q", v, got, want)
		}
	}
}
