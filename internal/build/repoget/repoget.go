package repoget

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

// StatusError is a GET answered with another status than 200 OK.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: %s", e.URL, http.StatusText(e.Code))
}

// TooLargeError is a file longer than the limit it was read with.
type TooLargeError struct {
	URL   string
	Limit int64
}

func (e *TooLargeError) Error() string { return fmt.Sprintf("%s: more than %d bytes", e.URL, e.Limit) }

// Get reads the file at u, at most limit bytes (more is a
// *TooLargeError), through hc (nil means http.DefaultClient) for http and
// https URLs, from the local file system for file URLs.
func Get(ctx context.Context, hc *http.Client, u string, limit int64) ([]byte, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	var body io.ReadCloser
	if pu.Scheme == "file" {
		f, err := os.Open(pu.Path)
		if err != nil {
			return nil, err
		}
		body = f
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if hc == nil {
			hc = http.DefaultClient
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, &StatusError{URL: u, Code: resp.StatusCode}
		}
		body = resp.Body
	}
	defer body.Close()
	var b bytes.Buffer
	n, err := io.Copy(&b, io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	if n > limit {
		return nil, &TooLargeError{URL: u, Limit: limit}
	}
	return b.Bytes(), nil
}
