package egress

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTrailersMaskedWithoutBody plays an upstream that echoes the
// substituted credential in the trailers of responses that carry no
// body: a 204 and a 304, declared and undeclared trailers. Over HTTP/2
// such a response is a HEADERS frame followed by a trailing one, and its
// trailers reach the guest like those of any other response: masked.
func TestTrailersMaskedWithoutBody(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusNoContent, http.StatusNotModified} {
		h, _ := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Echo")
			w.WriteHeader(status)
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			w.Header().Set(http.TrailerPrefix+"X-Undeclared", r.Header.Get("Authorization"))
		})
		for _, h2 := range []bool{true, false} {
			req := mustRequest(t, "GET", "https://api.test/v1/ping", "")
			req.Header.Set("Authorization", "Bearer "+keyPH)
			res, _ := do(t, h.client(h2), req)
			if res.StatusCode != status {
				t.Errorf("status %d h2=%v: got %d", status, h2, res.StatusCode)
			}
			for k, vs := range res.Trailer {
				for _, v := range vs {
					if run := valueRun(v, keyValue, 8); run != "" {
						t.Errorf("status %d h2=%v: trailer %s: %q holds %q of the value", status, h2, k, v, run)
					}
				}
			}
			if h2 && res.Trailer.Get("X-Echo") != "Bearer "+keyPH {
				t.Errorf("status %d h2=%v: trailer X-Echo is %q, want the placeholder", status, h2, res.Trailer.Get("X-Echo"))
			}
		}
	}
}

// TestStackedContentEncodingRefused plays an upstream that gzips its
// echo of the credential and says so in a second Content-Encoding line
// after "identity": the guest's client decodes what both lines name, so
// the body must be decoded before it is masked (one gzip, however many
// lines say it and "identity"), or refused (another coding, two codings).
func TestStackedContentEncodingRefused(t *testing.T) {
	for _, ce := range [][]string{{"identity", "gzip"}, {"", "gzip"}, {"identity", "br"}, {"gzip", "gzip"}, {"gzip"}} {
		h, _ := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			io.WriteString(zw, "echo: "+r.Header.Get("Authorization"))
			zw.Close()
			if len(ce) == 2 && ce[0] == "gzip" {
				// Twice compressed.
				var b2 bytes.Buffer
				zw := gzip.NewWriter(&b2)
				zw.Write(b.Bytes())
				zw.Close()
				b = b2
			}
			w.Header()["Content-Encoding"] = ce
			w.Write(b.Bytes())
		})
		for _, h2 := range []bool{true, false} {
			req := mustRequest(t, "GET", "https://api.test/v1/echo", "")
			req.Header.Set("Authorization", "Bearer "+keyPH)
			res, body := do(t, h.client(h2), req)
			// The guest decodes what it gets, whatever the headers say.
			dec := body
			for {
				zr, err := gzip.NewReader(strings.NewReader(dec))
				if err != nil {
					break
				}
				d, err := io.ReadAll(zr)
				if err != nil {
					break
				}
				dec = string(d)
			}
			if run := valueRun(dec, keyValue, 8); run != "" {
				t.Errorf("Content-Encoding %q h2=%v: the guest decoded %q of the value (%d, Content-Encoding %q)", ce, h2, run, res.StatusCode, res.Header.Values("Content-Encoding"))
			}
			switch {
			case ce[len(ce)-1] == "gzip" && (len(ce) == 1 || ce[0] != "gzip"):
				if res.StatusCode != http.StatusOK || body != "echo: Bearer "+keyPH || len(res.Header.Values("Content-Encoding")) != 0 {
					t.Errorf("Content-Encoding %q h2=%v: %d %q (Content-Encoding %q), want the echo decoded and masked", ce, h2, res.StatusCode, body, res.Header.Values("Content-Encoding"))
				}
			case res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot be checked for secret values"):
				t.Errorf("Content-Encoding %q h2=%v: %d %q, want a 502 saying the body cannot be checked", ce, h2, res.StatusCode, body)
			}
		}
	}
}

// TestRequestRangeNotSentWithASecret: Apache httpd reads Request-Range,
// the Range header of early Netscape clients, as Range; it is dropped
// with Range from a request a secret went into.
func TestRequestRangeNotSentWithASecret(t *testing.T) {
	h, rec := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
	for _, h2 := range []bool{false, true} {
		req := mustRequest(t, "GET", "https://api.test/v1/echo", "")
		req.Header.Set("Authorization", "Bearer "+keyPH)
		req.Header.Set("Request-Range", "bytes=0-24,25-200")
		if res, body := do(t, h.client(h2), req); res.StatusCode != 200 || body != "ok" {
			t.Errorf("h2=%v: %d %q", h2, res.StatusCode, body)
		}
	}
	for _, r := range rec.all() {
		if strings.Contains(r, keyValue) && strings.Contains(r, "\nRequest-Range:") {
			t.Errorf("the upstream got a Request-Range with the secret:\n%s", r)
		}
	}
}

// TestRangeNotSentToASecretsHost plays an upstream that keeps what a
// request authorised with the secret sent (a request log, a resource
// recording its creator's credential) and serves it on a later request
// that carries no secret. That later request asks for the record in
// ranges that cut the value where the guest chose: ranges are not sent
// to a host the secret goes to, whether or not a secret went into that
// request, so the record comes back whole and masked.
func TestRangeNotSentToASecretsHost(t *testing.T) {
	var mu sync.Mutex
	var last string
	h, _ := keyHarness(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/v1/log" {
			http.ServeContent(w, r, "log.txt", time.Time{}, strings.NewReader("last request: "+last+" end of log"))
			return
		}
		last = r.Header.Get("Authorization")
		io.WriteString(w, "ok")
	})
	for _, h2 := range []bool{false, true} {
		c := h.client(h2)
		req := mustRequest(t, "GET", "https://api.test/v1/models", "")
		req.Header.Set("Authorization", "Bearer "+keyPH)
		if res, body := do(t, c, req); res.StatusCode != 200 || body != "ok" {
			t.Fatalf("h2=%v: %d %q", h2, res.StatusCode, body)
		}
		var rebuilt string
		for _, rng := range []string{"bytes=21-44", "bytes=37-60", "bytes=21-44,45-200"} {
			req := mustRequest(t, "GET", "https://api.test/v1/log", "")
			req.Header.Set("Range", rng)
			res, body := do(t, c, req)
			if run := valueRun(body, keyValue, 8); run != "" {
				t.Errorf("h2=%v Range %s: %d, the guest got %q of the value", h2, rng, res.StatusCode, run)
			}
			rebuilt += body
		}
		if strings.Contains(rebuilt, keyValue[:24]) && strings.Contains(rebuilt, keyValue[16:]) {
			t.Errorf("h2=%v: the guest rebuilt the value from ranges of the log", h2)
		}
	}
}
