package sigv4

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Algorithm is the only signing algorithm handled.
const Algorithm = "AWS4-HMAC-SHA256"

// Payload hash values with a meaning of their own.
const (
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// StreamingPayload is the aws-chunked body whose every chunk is signed.
	StreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// StreamingUnsignedTrailer is an aws-chunked body whose chunks are
	// not signed, with a checksum trailer.
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	// EmptySHA256 is the hex SHA-256 of no bytes.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// TimeFormat is the form of X-Amz-Date.
const TimeFormat = "20060102T150405Z"

// Credential is what signs: an access key id, its secret and, for
// temporary credentials, a session token.
type Credential struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// Auth is a parsed Authorization header.
type Auth struct {
	AccessKeyID string
	Date        string // yyyymmdd of the scope
	Region      string
	Service     string
	// SignedHeaders are the names signed, lower case, in order.
	SignedHeaders []string
	Signature     string
}

// Scope is the credential scope, date/region/service/aws4_request.
func (a *Auth) Scope() string {
	return a.Date + "/" + a.Region + "/" + a.Service + "/aws4_request"
}

// ErrNotSigV4 is returned by ParseAuth for an Authorization header of
// another scheme.
var ErrNotSigV4 = errors.New("not an AWS4-HMAC-SHA256 authorization")

// ParseAuth parses "AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request,
// SignedHeaders=a;b, Signature=hex".
func ParseAuth(v string) (*Auth, error) {
	alg, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || alg != Algorithm {
		return nil, ErrNotSigV4
	}
	a := &Auth{}
	seen := map[string]bool{}
	for _, part := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[k] {
			return nil, fmt.Errorf("malformed %s authorization", Algorithm)
		}
		seen[k] = true
		switch k {
		case "Credential":
			f := strings.Split(val, "/")
			if len(f) != 5 || f[4] != "aws4_request" || f[0] == "" || len(f[1]) != 8 || f[2] == "" || f[3] == "" {
				return nil, fmt.Errorf("malformed credential scope in the %s authorization", Algorithm)
			}
			a.AccessKeyID, a.Date, a.Region, a.Service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.SignedHeaders = strings.Split(val, ";")
			if !sort.StringsAreSorted(a.SignedHeaders) {
				return nil, errors.New("signed headers are not sorted")
			}
			for _, h := range a.SignedHeaders {
				if h == "" || h != strings.ToLower(h) {
					return nil, errors.New("malformed signed headers")
				}
			}
		case "Signature":
			if len(val) != 64 || !isLowerHex(val) {
				return nil, errors.New("malformed signature")
			}
			a.Signature = val
		default:
			return nil, fmt.Errorf("unknown field %q in the %s authorization", k, Algorithm)
		}
	}
	if a.AccessKeyID == "" || a.SignedHeaders == nil || a.Signature == "" {
		return nil, fmt.Errorf("incomplete %s authorization", Algorithm)
	}
	if !contains(a.SignedHeaders, "host") {
		return nil, errors.New("the host header is not signed")
	}
	return a, nil
}

// String renders a as an Authorization header value.
func (a *Auth) String() string {
	return Algorithm + " Credential=" + a.AccessKeyID + "/" + a.Scope() +
		", SignedHeaders=" + strings.Join(a.SignedHeaders, ";") + ", Signature=" + a.Signature
}

// Request is what a signature covers, as the signer saw the request.
type Request struct {
	Method string
	// EscapedPath is the path as sent on the wire; RawQuery the query.
	EscapedPath, RawQuery string
	// Host is the Host header (or :authority).
	Host   string
	Header http.Header
	// ContentLength is the body's length, -1 when unknown; it stands for
	// a signed content-length header (Go's server keeps it out of Header).
	ContentLength int64
}

// FromHTTP describes r, a request a server received or a client sends.
func FromHTTP(r *http.Request) Request {
	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host
	}
	return Request{Method: r.Method, EscapedPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
		Host: host, Header: r.Header, ContentLength: r.ContentLength}
}

// CanonicalRequest is the canonical request of r over signed, with
// payloadHash as its last line. A signed header r lacks is an error:
// the signature could not be checked, nor made again.
func CanonicalRequest(r Request, service string, signed []string, payloadHash string) (string, error) {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	path := r.EscapedPath
	if path == "" {
		path = "/"
	}
	if service != "s3" {
		// Every service but S3 signs the path escaped once more.
		path = escape(path, true)
	}
	b.WriteString(path)
	b.WriteByte('\n')
	q, err := canonicalQuery(r.RawQuery)
	if err != nil {
		return "", err
	}
	b.WriteString(q)
	b.WriteByte('\n')
	for _, h := range signed {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			if v := r.Header.Values("Content-Length"); len(v) > 0 {
				vals = v
			} else if r.ContentLength >= 0 {
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		default:
			vals = r.Header.Values(h)
		}
		if len(vals) == 0 {
			return "", fmt.Errorf("signed header %s is missing", h)
		}
		b.WriteString(h)
		b.WriteByte(':')
		for i, v := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.TrimSpace(collapseSpaces(v)))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), nil
}

// Sign returns the signature, hex, of r over a's scope and signed
// headers, at amzDate (X-Amz-Date), made with secret.
func Sign(r Request, a *Auth, amzDate, payloadHash, secret string) (string, error) {
	cr, err := CanonicalRequest(r, a.Service, a.SignedHeaders, payloadHash)
	if err != nil {
		return "", err
	}
	sts := Algorithm + "\n" + amzDate + "\n" + a.Scope() + "\n" + hexSHA256([]byte(cr))
	return hex.EncodeToString(hmacSHA256(SigningKey(secret, a.Date, a.Region, a.Service), []byte(sts))), nil
}

// Verify reports whether a.Signature is r's signature made with secret.
func Verify(r Request, a *Auth, amzDate, payloadHash, secret string) error {
	sig, err := Sign(r, a, amzDate, payloadHash, secret)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(sig), []byte(a.Signature)) {
		return errors.New("the signature does not match the request")
	}
	return nil
}

// AmzDate returns the request's X-Amz-Date, checked against the scope's
// date. (A Date header alone is not accepted: every SDK sends X-Amz-Date.)
func AmzDate(h http.Header, a *Auth) (string, error) {
	d := h.Values("X-Amz-Date")
	if len(d) != 1 {
		return "", errors.New("the request has no single X-Amz-Date")
	}
	if _, err := time.Parse(TimeFormat, d[0]); err != nil {
		return "", fmt.Errorf("malformed X-Amz-Date %q", d[0])
	}
	if !strings.HasPrefix(d[0], a.Date) {
		return "", errors.New("X-Amz-Date is not the credential scope's date")
	}
	if !contains(a.SignedHeaders, "x-amz-date") {
		return "", errors.New("X-Amz-Date is not signed")
	}
	return d[0], nil
}

// SigningKey derives the key for date/region/service from secret.
func SigningKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), []byte(date))
	k = hmacSHA256(k, []byte(region))
	k = hmacSHA256(k, []byte(service))
	return hmacSHA256(k, []byte("aws4_request"))
}

// IsPresigned reports whether a query carries query authorization
// (a presigned URL).
func IsPresigned(q url.Values) bool {
	for k := range q {
		switch strings.ToLower(k) {
		case "x-amz-credential", "x-amz-signature", "x-amz-algorithm", "x-amz-security-token":
			return true
		}
	}
	return false
}

func canonicalQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	type kv struct{ k, v string }
	var ps []kv
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		uk, err := url.QueryUnescape(k)
		if err != nil {
			return "", fmt.Errorf("malformed query: %v", err)
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			return "", fmt.Errorf("malformed query: %v", err)
		}
		ps = append(ps, kv{escape(uk, false), escape(uv, false)})
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].k != ps[j].k {
			return ps[i].k < ps[j].k
		}
		return ps[i].v < ps[j].v
	})
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String(), nil
}

// escape percent-encodes every byte but the unreserved ones (and "/"
// when keepSlash), upper-case hex, as SigV4 wants.
func escape(s string, keepSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || keepSlash && c == '/' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func collapseSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b bytes.Buffer
	space := false
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsHexSHA256 reports whether v is a hex SHA-256 (lower case).
func IsHexSHA256(v string) bool { return len(v) == 64 && isLowerHex(v) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
