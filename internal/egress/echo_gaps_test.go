package egress

import (
	"net/http"
	"testing"
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
