package download

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/digest"
)

// Want is what a download must match. Zero fields are not checked; a
// download with no field set is trusted on first use.
type Want struct {
	// SHA256 is the lowercase hex sha256 of the content.
	SHA256 string
	// Integrity is a Subresource Integrity string as npm records it,
	// e.g. "sha512-<base64>"; several space-separated hashes are allowed
	// and, as in SRI, the strongest algorithm listed decides.
	Integrity string
	// SHA1 is the lowercase hex sha1 (npm's "shasum").
	SHA1 string
	// Size is the length in bytes; 0 means unknown.
	Size int64
}

// Digests are the hashes of downloaded content.
type Digests struct {
	Size   int64
	SHA256 string // lowercase hex
	SHA1   string // lowercase hex
	// Integrity is "sha512-<base64>", the form npm records.
	Integrity string
}

// Get downloads rawURL with client, sending header (nil for none), and
// streams it into w while hashing it, then checks the result against
// want. It fails on a non-200 status, on a body shorter or longer than its
// Content-Length or want.Size, and on any hash mismatch.
//
// Bytes reach w as they arrive, before they are verified: when an error is
// returned the caller must discard whatever w received. Credentials in
// rawURL are never repeated in errors.
func Get(ctx context.Context, client *http.Client, rawURL string, header http.Header, want Want, w io.Writer) (Digests, error) {
	shown := Redact(rawURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return Digests{}, fmt.Errorf("%s: %w", shown, StripURLError(err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Digests{}, fmt.Errorf("GET %s: %w", shown, StripURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Digests{}, fmt.Errorf("GET %s: server answered %s", shown, resp.Status)
	}
	return verifyStream(shown, resp.Body, resp.ContentLength, want, w)
}

// verifyStream copies r to w while hashing it and checks the result.
// length is the length the source announced, or -1.
func verifyStream(input string, r io.Reader, length int64, want Want, w io.Writer) (Digests, error) {
	if want.Size > 0 && length >= 0 && length != want.Size {
		return Digests{}, &digest.MismatchError{Input: input, Algo: "size", Want: fmt.Sprint(want.Size), Got: fmt.Sprint(length)}
	}
	sri, err := parseIntegrity(want.Integrity)
	if err != nil {
		return Digests{}, fmt.Errorf("%s: %w", input, err)
	}
	h256, h512, h1 := sha256.New(), sha512.New(), sha1.New()
	writers := []io.Writer{h256, h512, h1}
	var h384 hash.Hash
	if sri.algo == "sha384" {
		h384 = sha512.New384()
		writers = append(writers, h384)
	}
	if w != nil {
		writers = append(writers, w)
	}
	n, err := io.Copy(io.MultiWriter(writers...), r)
	if err != nil {
		if length >= 0 {
			return Digests{}, fmt.Errorf("%s: download failed after %d of %d bytes: %w", input, n, length, err)
		}
		return Digests{}, fmt.Errorf("%s: download failed after %d bytes: %w", input, n, err)
	}
	if length >= 0 && n != length {
		return Digests{}, fmt.Errorf("%s: truncated download: got %d of %d bytes", input, n, length)
	}
	if want.Size > 0 && n != want.Size {
		return Digests{}, &digest.MismatchError{Input: input, Algo: "size", Want: fmt.Sprint(want.Size), Got: fmt.Sprint(n)}
	}
	got := Digests{
		Size:      n,
		SHA256:    hex.EncodeToString(h256.Sum(nil)),
		SHA1:      hex.EncodeToString(h1.Sum(nil)),
		Integrity: "sha512-" + base64.StdEncoding.EncodeToString(h512.Sum(nil)),
	}
	if want.SHA256 != "" && !strings.EqualFold(want.SHA256, got.SHA256) {
		return Digests{}, &digest.MismatchError{Input: input, Algo: "sha256", Want: strings.ToLower(want.SHA256), Got: got.SHA256}
	}
	if sri.algo != "" {
		var sum []byte
		switch sri.algo {
		case "sha512":
			sum = h512.Sum(nil)
		case "sha384":
			sum = h384.Sum(nil)
		case "sha256":
			sum = h256.Sum(nil)
		case "sha1":
			sum = h1.Sum(nil)
		}
		gotSRI := sri.algo + "-" + base64.StdEncoding.EncodeToString(sum)
		if !sri.matches(gotSRI) {
			return Digests{}, &digest.MismatchError{Input: input, Algo: sri.algo, Want: strings.Join(sri.values, " "), Got: gotSRI}
		}
	}
	// sha1 last: the stronger hashes above decide what a mismatch reports.
	if want.SHA1 != "" && !strings.EqualFold(want.SHA1, got.SHA1) {
		return Digests{}, &digest.MismatchError{Input: input, Algo: "sha1", Want: strings.ToLower(want.SHA1), Got: got.SHA1}
	}
	return got, nil
}

// integrity is the part of an SRI string that decides: the strongest
// algorithm present and its values.
type integrity struct {
	algo   string
	values []string // "algo-base64", options stripped
}

func (i integrity) matches(s string) bool {
	for _, v := range i.values {
		if v == s {
			return true
		}
	}
	return false
}

var sriStrength = map[string]int{"sha1": 1, "sha256": 2, "sha384": 3, "sha512": 4}

// parseIntegrity parses a Subresource Integrity string. Unknown algorithms
// are ignored as SRI requires, but a non-empty string with none known is
// an error: it would otherwise verify nothing.
func parseIntegrity(s string) (integrity, error) {
	var best integrity
	for _, tok := range strings.Fields(s) {
		tok, _, _ = strings.Cut(tok, "?")
		algo, b64, ok := strings.Cut(tok, "-")
		if !ok || sriStrength[algo] == 0 {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(b64); err != nil {
			return integrity{}, fmt.Errorf("invalid integrity %q: %v", tok, err)
		}
		switch {
		case sriStrength[algo] > sriStrength[best.algo]:
			best = integrity{algo: algo, values: []string{tok}}
		case algo == best.algo:
			best.values = append(best.values, tok)
		}
	}
	if strings.TrimSpace(s) != "" && best.algo == "" {
		return integrity{}, fmt.Errorf("integrity %q names no supported hash (sha512, sha384, sha256, sha1)", s)
	}
	return best, nil
}

// UserAgent is what sbx calls itself in the requests it makes.
const UserAgent = "sbx"

// Redact returns rawURL without its user information (a user name
// can be a token too), for messages.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User == nil {
		return rawURL
	}
	u.User = nil
	return u.String()
}

// StripURLError drops the *url.Error wrapper, whose message repeats the
// URL as given (credentials included); callers name the URL themselves.
func StripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// HTTPSOnly returns a copy of client that refuses redirects away from
// https, so that a first download trusted without a declared hash cannot
// be downgraded to plain http on the way.
func HTTPSOnly(client *http.Client) *http.Client {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return fmt.Errorf("refused redirect to %s: only https", Redact(req.URL.String()))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}
