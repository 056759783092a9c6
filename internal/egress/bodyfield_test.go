package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/policy"
)

const (
	clientValue = "cs-live-2f9b1d7e5a3c8046b2d4f6a8c0e1d3b5"
	clientPH    = "sbx_ph_client_9e8d7c6b5a4f3e2d1c0b9a8f7e6d"
)

// bodyHarness has auth.test and api.test, where secret "client" goes in
// the form field client_secret of POST /oauth/token on auth.test and in
// the JSON field auth.key of /v1/login on api.test, and other.test,
// allowed but not bound. The upstream records what it got (with the
// Content-Length it was sent) and echoes the body.
func bodyHarness(t *testing.T) (*harness, *recorder) {
	t.Helper()
	pki := newUpstreamPKI(t)
	rec := &recorder{}
	up := upstreamTLS(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.add(r, body)
		if r.ContentLength >= 0 && r.ContentLength != int64(len(body)) {
			http.Error(w, "content length "+strconv.FormatInt(r.ContentLength, 10)+" for "+strconv.Itoa(len(body))+" bytes", http.StatusBadRequest)
			return
		}
		w.Write(body)
	}), "auth.test", "api.test", "other.test")
	p := spec(pki, []policy.AllowRule{allow("auth.test", 4), allow("api.test", 5), allow("other.test", 6)},
		mapping("auth.test", serverAddr(up)), mapping("api.test", serverAddr(up)), mapping("other.test", serverAddr(up)))
	p.Secrets = []policy.SecretBinding{{
		Name: "client", Env: "CLIENT_SECRET", Source: "env:CLIENT_SECRET",
		Hosts: []policy.HostPattern{policy.MustHostPattern("auth.test"), policy.MustHostPattern("api.test")},
		Body: []policy.BodyField{
			{Host: "auth.test", Path: "/oauth/token", Form: "client_secret", Origin: origin("secret.client", 33)},
			{Host: "api.test", Path: "/v1/login", JSON: "auth.key", Origin: origin("secret.client", 38)},
		},
		Origin: origin("secret.client", 30),
	}}
	h := newHarness(t, p, map[string][]byte{"client": []byte(clientValue)}, map[string]string{"client": clientPH})
	return h, rec
}

func bodyRequest(t *testing.T, url, ct, body string) *http.Request {
	req := mustRequest(t, "POST", url, body)
	req.Header.Set("Content-Type", ct)
	return req
}

// sentBodies returns the bodies the upstream got for path.
func sentBodies(rec *recorder, path string) []string {
	var out []string
	for _, r := range rec.all() {
		if first, _, _ := strings.Cut(r, "\n"); strings.HasSuffix(first, " "+path) {
			out = append(out, r[strings.LastIndex(r, "\n")+1:])
		}
	}
	return out
}

// TestBodyFieldSubstituted checks that the value goes in the one field
// the secret names, over h1 (with a fixed length and chunked, split
// inside the placeholder) and h2, that the upstream gets a body whose
// Content-Length is right, and that its echo comes back masked.
func TestBodyFieldSubstituted(t *testing.T) {
	h, rec := bodyHarness(t)
	form := "grant_type=client_credentials&client_id=app&client_secret=" + clientPH
	wantForm := "grant_type=client_credentials&client_id=app&client_secret=" + clientValue
	for _, h2 := range []bool{false, true} {
		res, body := do(t, h.client(h2), bodyRequest(t, "https://auth.test/oauth/token", "application/x-www-form-urlencoded", form))
		if res.StatusCode != 200 || body != form {
			t.Errorf("h2=%v form: %d %q", h2, res.StatusCode, body)
		}
		js := `{"user":"me","auth":{"key":"` + clientPH + `"},"n":[1,2]}`
		res, body = do(t, h.client(h2), bodyRequest(t, "https://api.test/v1/login", "application/json; charset=utf-8", js))
		if res.StatusCode != 200 || body != js {
			t.Errorf("h2=%v json: %d %q", h2, res.StatusCode, body)
		}
	}
	// Chunked, the placeholder split across chunks.
	half := len(clientPH) / 2
	c, err := h.guestTLS("auth.test", 443, "auth.test", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(c)
	fmt.Fprintf(bw, "POST /oauth/token HTTP/1.1\r\nHost: auth.test\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, p := range []string{"client_id=app&client_secret=" + clientPH[:half], clientPH[half:]} {
		fmt.Fprintf(bw, "%x\r\n%s\r\n", len(p), p)
		bw.Flush()
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintf(bw, "0\r\n\r\n")
	bw.Flush()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	c.Close()
	if res.StatusCode != 200 || string(body) != "client_id=app&client_secret="+clientPH {
		t.Errorf("chunked: %d %q", res.StatusCode, body)
	}

	got := sentBodies(rec, "/oauth/token")
	if len(got) != 3 || got[0] != wantForm || got[1] != wantForm || got[2] != "client_id=app&client_secret="+clientValue {
		t.Errorf("the token endpoint got %q", got)
	}
	wantJSON := `{"user":"me","auth":{"key":"` + clientValue + `"},"n":[1,2]}`
	if got := sentBodies(rec, "/v1/login"); len(got) != 2 || got[0] != wantJSON || got[1] != wantJSON {
		t.Errorf("the login endpoint got %q", got)
	}
	es := h.entriesAfter(5, func(e audit.Entry) bool { return e.Path == "/oauth/token" || e.Path == "/v1/login" })
	n := 0
	for _, e := range es {
		if len(e.Secrets) == 1 && e.Secrets[0] == "client" {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d audit entries name the secret, want 5: %+v", n, es)
	}
}

// TestBodyFieldRefusals plays a guest that puts the placeholder
// anywhere but the one whole field: each request is refused, and the
// upstream never sees the placeholder or the value.
func TestBodyFieldRefusals(t *testing.T) {
	h, rec := bodyHarness(t)
	const form, js = "application/x-www-form-urlencoded", "application/json"
	esc := `\u0073` + clientPH[1:] // "s" escaped
	var mp bytes.Buffer
	fmt.Fprintf(&mp, "--b\r\nContent-Disposition: form-data; name=\"client_secret\"\r\n\r\n%s\r\n--b--\r\n", clientPH)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, "client_secret="+clientPH)
	zw.Close()
	big := "client_secret=" + clientPH + "&pad=" + strings.Repeat("a", maxSubstitutedBody)
	for _, c := range []struct {
		name, url, ct, body string
		status              int
		enc                 string
	}{
		{"form other field", "https://auth.test/oauth/token", form, "client_id=" + clientPH, 403, ""},
		{"form substring", "https://auth.test/oauth/token", form, "client_secret=x" + clientPH, 403, ""},
		{"form suffix", "https://auth.test/oauth/token", form, "client_secret=" + clientPH + "x", 403, ""},
		{"form encoded substring", "https://auth.test/oauth/token", form, "client_secret=" + clientPH + "%26a%3D1", 403, ""},
		{"form twice", "https://auth.test/oauth/token", form, "client_secret=" + clientPH + "&client_secret=x", 403, ""},
		{"form name escaped twice", "https://auth.test/oauth/token", form, "client_secret=" + clientPH + "&client%5Fsecret=x", 403, ""},
		{"form in a name", "https://auth.test/oauth/token", form, clientPH + "=1", 403, ""},
		{"form semicolon", "https://auth.test/oauth/token", form, "a=1;client_secret=" + clientPH, 403, ""},
		{"form bad escape", "https://auth.test/oauth/token", form, "client_secret=" + clientPH + "%zz", 403, ""},
		{"form bad escape elsewhere", "https://auth.test/oauth/token", form, "client_secret=" + clientPH + "&x=%0X", 403, ""},
		{"form as json", "https://auth.test/oauth/token", js, `{"client_secret":"` + clientPH + `"}`, 403, ""},
		{"multipart", "https://auth.test/oauth/token", "multipart/form-data; boundary=b", mp.String(), 403, ""},
		{"gzip", "https://auth.test/oauth/token", form, gz.String(), 403, "gzip"},
		{"too large", "https://auth.test/oauth/token", form, big, 413, ""},
		{"other path", "https://auth.test/token", form, "client_secret=" + clientPH, 403, ""},
		{"escaped path", "https://auth.test/oauth/t%6Fken", form, "client_secret=" + clientPH, 403, ""},
		{"other host", "https://other.test/oauth/token", form, "client_secret=" + clientPH, 403, ""},
		{"json other field", "https://api.test/v1/login", js, `{"auth":{"key":"x","note":"` + clientPH + `"}}`, 403, ""},
		{"json substring", "https://api.test/v1/login", js, `{"auth":{"key":"Bearer ` + clientPH + `"}}`, 403, ""},
		{"json top level", "https://api.test/v1/login", js, `{"key":"` + clientPH + `"}`, 403, ""},
		{"json in array", "https://api.test/v1/login", js, `{"auth":[{"key":"` + clientPH + `"}]}`, 403, ""},
		{"json key", "https://api.test/v1/login", js, `{"auth":{"` + clientPH + `":"x"}}`, 403, ""},
		{"json duplicate key", "https://api.test/v1/login", js, `{"auth":{"key":"` + clientPH + `","key":"x"}}`, 403, ""},
		{"json duplicate key escaped", "https://api.test/v1/login", js, `{"auth":{"key":"x","k\u0065y":"` + clientPH + `"}}`, 403, ""},
		{"json duplicate elsewhere", "https://api.test/v1/login", js, `{"auth":{"key":"` + clientPH + `"},"a":1,"a":2}`, 403, ""},
		{"json escaped placeholder", "https://api.test/v1/login", js, `{"auth":{"key":"` + esc + `"}}`, 403, ""},
		{"json escaped elsewhere", "https://api.test/v1/login", js, `{"auth":{"key":"` + clientPH + `"},"b":"` + esc + `"}`, 403, ""},
		{"json two values", "https://api.test/v1/login", js, `{"auth":{"key":"` + clientPH + `"}} {"x":"` + clientPH + `"}`, 403, ""},
		{"json trailing", "https://api.test/v1/login", js, `{"auth":{"key":"` + clientPH + `"}}x`, 403, ""},
		{"json as form", "https://api.test/v1/login", form, "auth.key=" + clientPH, 403, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := bodyRequest(t, c.url, c.ct, c.body)
			if c.enc != "" {
				req.Header.Set("Content-Encoding", c.enc)
			}
			res, body := do(t, h.client(false), req)
			if res.StatusCode != c.status || !strings.Contains(body, `secret "client"`) {
				t.Errorf("%d %q, want %d naming the secret", res.StatusCode, body, c.status)
			}
		})
	}
	for _, r := range rec.all() {
		if strings.Contains(r, clientPH) || strings.Contains(r, clientValue) || strings.Contains(r, clientPH[1:]) {
			t.Errorf("the upstream got:\n%.300s", r)
		}
	}
	// The same bodies without the placeholder go on as they are.
	res, body := do(t, h.client(false), bodyRequest(t, "https://auth.test/oauth/token", form, "client_secret=abc&x=1"))
	if res.StatusCode != 200 || body != "client_secret=abc&x=1" {
		t.Errorf("no placeholder: %d %q", res.StatusCode, body)
	}
	res, body = do(t, h.client(false), bodyRequest(t, "https://auth.test/other", "text/plain", "hello"))
	if res.StatusCode != 200 || body != "hello" {
		t.Errorf("no placeholder, other path: %d %q", res.StatusCode, body)
	}
}

// FuzzBodyField feeds the form and JSON substituters any body: they
// never panic, and what they return carries the value exactly once, as
// the whole value of the named field (decoded the way a server decodes
// it), with the placeholder nowhere; a refused or untouched body
// carries no value they put there.
func FuzzBodyField(f *testing.F) {
	for _, s := range []string{
		"client_secret=" + clientPH,
		"a=1&client_secret=" + clientPH + "&b=2",
		"client_secret=x" + clientPH,
		"client_secret=" + clientPH + "&client_secret=" + clientPH,
		`{"auth":{"key":"` + clientPH + `"}}`,
		`{"auth":{"key":"\u0073` + clientPH[1:] + `"}}`,
		`{"auth":{"key":"` + clientPH + `","key":"x"}}`,
		`[{"auth":{"key":"` + clientPH + `"}}]`,
		`{"auth":{"key":"` + clientPH + `"}}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		inValue := bytes.Contains(body, []byte(clientValue))
		if out, err := substituteForm(body, []string{"client_secret"}, clientPH, clientValue); err == nil {
			if bytes.Contains(out, []byte(clientPH)) {
				t.Fatalf("form %q: the placeholder is left in %q", body, out)
			}
			if !inValue {
				vals, perr := url.ParseQuery(string(out))
				n := bytes.Count(out, []byte(url.QueryEscape(clientValue)))
				if perr != nil || n != 1 || len(vals["client_secret"]) != 1 || vals.Get("client_secret") != clientValue {
					t.Fatalf("form %q: out %q (%v), %d copies", body, out, perr, n)
				}
			}
		}
		// The WebSocket substituter, in both modes, on the body as a text
		// message: the value only as the whole message or the one field.
		sec := &secret{value: []byte(clientValue), placeholder: clientPH}
		for _, ws := range []*policy.WebSocketField{{}, {JSON: "auth.key"}} {
			sec.WebSocket = ws
			out, err := substituteWS(body, true, sec)
			if err != nil || inValue || !bytes.Contains(out, []byte(clientValue)) {
				continue
			}
			if bytes.Contains(out, []byte(clientPH)) {
				t.Fatalf("ws %q: the placeholder is left in %q", body, out)
			}
			if ws.JSON == "" && string(out) != clientValue {
				t.Fatalf("ws %q: whole-message mode made %q", body, out)
			}
		}
		if out, err := substituteJSON(body, []string{"auth.key"}, clientPH, clientValue); err == nil {
			if bytes.Contains(out, []byte(clientPH)) {
				t.Fatalf("json %q: the placeholder is left in %q", body, out)
			}
			if !inValue {
				var m map[string]any
				if jerr := json.Unmarshal(out, &m); jerr != nil {
					t.Fatalf("json %q: out %q is not an object: %v", body, out, jerr)
				}
				auth, _ := m["auth"].(map[string]any)
				if auth == nil || auth["key"] != clientValue || bytes.Count(out, []byte(clientValue)) != 1 {
					t.Fatalf("json %q: out %q", body, out)
				}
			}
		}
	})
}

// TestBodyFieldOnlyOverTLS checks that a body field is substituted only
// into a request that leaves over TLS, or to a plain_http destination.
func TestBodyFieldOnlyOverTLS(t *testing.T) {
	b := policy.SecretBinding{Name: "client", Env: "CLIENT_SECRET", Source: "env:CLIENT_SECRET",
		Hosts: []policy.HostPattern{policy.MustHostPattern("auth.test")},
		Body:  []policy.BodyField{{Host: "auth.test", Path: "/oauth/token", Form: "client_secret"}}}
	for _, plain := range []bool{false, true} {
		if plain {
			b.PlainHTTP = []policy.HostPort{{Host: "auth.test", Port: 80}}
		}
		p, err := Compile(policy.Sandbox{Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("auth.test")}}, Secrets: []policy.SecretBinding{b}},
			map[string][]byte{"client": []byte(clientValue)}, map[string]string{"client": clientPH})
		if err != nil {
			t.Fatal(err)
		}
		for _, tls := range []bool{true, false} {
			r := bodyRequest(t, "http://auth.test/oauth/token", "application/x-www-form-urlencoded", "client_secret="+clientPH)
			used, d := p.rewriteBody("auth.test", 80, tls, r)
			ok := tls || plain
			if (d == nil) != ok || ok && len(used) != 1 {
				t.Errorf("tls=%v plain_http=%v: used %v, denial %v", tls, plain, used, d)
			}
			if !ok && d != nil && !strings.Contains(d.reason, "unencrypted") {
				t.Errorf("denial %q", d.reason)
			}
		}
	}
}
