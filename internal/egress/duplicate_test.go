package egress

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// joiningUpstream reads headers as a WSGI or CGI server's environment
// variables (HTTP_X_API_KEY): names upper-cased with "-" as "_", and
// lines whose names then agree joined with ",". It answers a bad
// credential by quoting the first and last 24 bytes of it, as
// quotingUpstream does.
func joiningUpstream(w http.ResponseWriter, r *http.Request) {
	env := map[string][]string{}
	for k, vs := range r.Header {
		n := "HTTP_" + strings.ToUpper(strings.ReplaceAll(k, "-", "_"))
		env[n] = append(env[n], vs...)
	}
	var creds []string
	if a := strings.Join(env["HTTP_AUTHORIZATION"], ","); a != "" {
		_, cred, _ := strings.Cut(a, " ")
		creds = append(creds, cred)
	}
	if k := env["HTTP_X_API_KEY"]; len(k) > 0 {
		creds = append(creds, strings.Join(k, ","))
	}
	if len(creds) == 1 && creds[0] == keyValue {
		fmt.Fprint(w, "ok")
		return
	}
	w.WriteHeader(http.StatusUnauthorized)
	for _, c := range creds {
		first, last := c, c
		if len(c) > 24 {
			first, last = c[:24], c[len(c)-24:]
		}
		fmt.Fprintf(w, "invalid credential first=%s last=%s\n", first, last)
	}
}

// TestDuplicateCredentialHeaderRefused plays a guest that sends the
// placeholder where it goes and a second line of the same header with
// bytes of its own: a server that joins the lines sees the value next
// to those bytes, rejects it and quotes its ends, from which the guest
// would rebuild it whole. A header a secret went into must be alone:
// such a request is refused, naming the secret's rule, and the upstream
// never sees the value beside other bytes.
func TestDuplicateCredentialHeaderRefused(t *testing.T) {
	h, rec := keyHarness(t, joiningUpstream)
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		for what, set := range map[string]func(*http.Request){
			"bearer then other": func(r *http.Request) {
				r.Header.Add("Authorization", "Bearer "+keyPH)
				r.Header.Add("Authorization", "x")
			},
			"other then bearer": func(r *http.Request) {
				r.Header.Add("Authorization", "Bearer x")
				r.Header.Add("Authorization", "Bearer "+keyPH)
			},
			"bearer twice": func(r *http.Request) {
				r.Header.Add("Authorization", "Bearer "+keyPH)
				r.Header.Add("Authorization", "Bearer "+keyPH)
			},
			"basic then other": func(r *http.Request) {
				r.SetBasicAuth("u", keyPH)
				r.Header.Add("Authorization", "x")
			},
			"x-api-key then other": func(r *http.Request) {
				r.Header.Add("X-Api-Key", keyPH)
				r.Header.Add("X-Api-Key", "x")
			},
			// Both are HTTP_X_API_KEY to a CGI or WSGI server.
			"x-api-key and x_api_key": func(r *http.Request) {
				r.Header["X-Api-Key"] = []string{keyPH}
				r.Header["X_api_key"] = []string{"x"}
			},
		} {
			req := mustRequest(t, "GET", "https://api.test/v1/models", "")
			set(req)
			res, body := do(t, c, req)
			if res.StatusCode != http.StatusForbidden || !strings.Contains(body, `secret "key"`) || !strings.Contains(body, "main.hcl:30") {
				t.Errorf("h2=%v %s: %d %q, want a refusal naming secret.key (main.hcl:30)", h2, what, res.StatusCode, body)
			}
			if run := valueRun(body, keyValue, 8); run != "" {
				t.Errorf("h2=%v %s: the guest got %q of the value", h2, what, run)
			}
		}
		// One line is fine.
		req := mustRequest(t, "GET", "https://api.test/v1/models", "")
		req.Header.Set("Authorization", "Bearer "+keyPH)
		if res, body := do(t, c, req); res.StatusCode != 200 || body != "ok" {
			t.Errorf("h2=%v one Authorization line: %d %q", h2, res.StatusCode, body)
		}
	}
	for _, r := range rec.all() {
		for _, line := range strings.Split(r, "\n") {
			if line == "Authorization: Bearer "+keyValue {
				continue
			}
			if run := valueRun(line, keyValue, 4); run != "" {
				t.Errorf("the upstream got %q (value run %q) in:\n%s", line, run, r)
			}
		}
	}
}
