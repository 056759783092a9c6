package egress

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/sbx-dev/sbx/policy"
)

// substitution is what rewriting one request's headers did.
type substitution struct {
	// used names the secrets whose placeholders were replaced.
	used []string
	// extra are (upstream form, guest form) pairs to mask in the response
	// besides the values themselves: a Basic credential re-encoded with
	// the value would otherwise come back in base64 if echoed.
	extra [][2]string
}

// secretDenial is a request refused because a secret would go where its
// binding does not allow.
type secretDenial struct {
	reason string
	rule   policy.Origin
}

// rewriteRequest substitutes the secrets in the headers of a request to
// host:port and refuses the request when a secret would go where its
// binding does not put it. A placeholder is replaced by its value only
// where the secret's credential goes, and only as a whole token: the
// token of "Authorization: Bearer", the password of "Authorization:
// Basic" (decoded), or the whole value of a header the secret names.
// Anywhere else a placeholder refuses the request rather than being
// forwarded: in another header, around other bytes in one of those, in
// one of several lines of such a header (a server may join them, and
// a CGI or WSGI one reads X_Api_Key as X-Api-Key), in
// the path or the query, or in any part of a request to a host the
// secret is not bound to (where its real value refuses it too). So the
// upstream never sees the value next to bytes the guest chose. Values
// go only into requests that leave over verified TLS (tls), or to a
// destination the secret lists in plain_http. Bodies are never
// substituted into; see bodyScanner for what they may carry.
func (p *Policy) rewriteRequest(host string, port uint16, tls bool, h http.Header, rawURL string) (substitution, *secretDenial) {
	var sub substitution
	if len(p.secrets) == 0 {
		return sub, nil
	}
	for _, s := range p.secrets {
		hasPH, hasValue := strings.Contains(rawURL, s.placeholder), strings.Contains(rawURL, string(s.value))
		switch {
		case !s.bound(host) && (hasPH || hasValue):
			return sub, s.denial(host, "the URL")
		case hasPH:
			return sub, s.misplaced(host, "the URL")
		}
	}
	used := make(map[string]bool)
	// lines counts each header's lines by its name as a CGI or WSGI
	// server reads it (HTTP_X_API_KEY): "X_Api_Key" is "X-Api-Key".
	lines := make(map[string]int, len(h))
	for key, vals := range h {
		lines[cgiName(key)] += len(vals)
	}
	for key, vals := range h {
		lk := strings.ToLower(key)
		for _, s := range p.secrets {
			if strings.Contains(lk, strings.ToLower(s.placeholder)) || strings.Contains(lk, strings.ToLower(string(s.value))) {
				return sub, s.denial(host, "a header name")
			}
		}
		for i, v := range vals {
			nv, extra, s, d := p.rewriteHeader(host, lk, v, used)
			if d != nil {
				return sub, d
			}
			if n := lines[cgiName(key)]; s != nil && n > 1 {
				// Servers that join a header's lines (CGI, WSGI) would
				// see the value beside the other lines' bytes.
				return sub, s.misplaced(host, fmt.Sprintf("one of %d lines of header %s", n, lk))
			}
			if extra != nil {
				sub.extra = append(sub.extra, *extra)
			}
			vals[i] = nv
		}
	}
	for _, s := range p.secrets {
		if !used[s.Name] {
			continue
		}
		if !tls && !s.plainAllowed(host, port) {
			// Over plain HTTP the value would cross the network in the
			// clear; only a destination the secret names may take it.
			return sub, &secretDenial{
				reason: fmt.Sprintf("secret %q would be sent unencrypted to %s:%d; use https, or add \"%s:%d\" to the secret's plain_http in %s if this is a local fixture",
					s.Name, host, port, host, port, originString(s.Origin)),
				rule: s.Origin,
			}
		}
		sub.used = append(sub.used, s.Name)
	}
	return sub, nil
}

// rewriteHeader checks one header value (key in lower case) of a request
// to host and returns it with a placeholder replaced when it stands where
// its secret goes, the (upstream, guest) form of a Basic credential to
// mask in the response, and the secret substituted, if one was.
func (p *Policy) rewriteHeader(host, key, v string, used map[string]bool) (string, *[2]string, *secret, *secretDenial) {
	if d := p.checkUnbound(host, "header "+key, v); d != nil {
		return "", nil, nil, d
	}
	var basic string
	scheme, cred, isBasic := cutBasic(v)
	if key == "authorization" && isBasic {
		if raw, err := base64.StdEncoding.DecodeString(cred); err == nil {
			basic = string(raw)
			if d := p.checkUnbound(host, "header authorization (Basic credential)", basic); d != nil {
				return "", nil, nil, d
			}
		}
	}
	for _, s := range p.secrets {
		if !strings.Contains(v, s.placeholder) && !strings.Contains(basic, s.placeholder) {
			continue
		}
		if s.aws != nil {
			// An AWS credential goes only into the signature the host
			// makes (checkAWS removed the headers it verified).
			return "", nil, nil, s.aws.refuse(host, "a placeholder of it is in header "+key+", where it is never substituted; it goes only into a Signature Version 4 signature the host verifies and makes again")
		}
		// The secret is bound to host (checkUnbound): the placeholder must
		// be exactly where the secret goes.
		switch {
		case key == "authorization" && isBearer(v, s.placeholder):
			used[s.Name] = true
			return "Bearer " + string(s.value), nil, s, nil
		case key == "authorization" && isBasic && basicPassword(basic, s.placeholder):
			used[s.Name] = true
			user, _, _ := strings.Cut(basic, ":")
			enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + string(s.value)))
			return scheme + " " + enc, &[2]string{enc, cred}, s, nil
		case s.takesHeader(key) && strings.TrimSpace(v) == s.placeholder:
			used[s.Name] = true
			return string(s.value), nil, s, nil
		}
		return "", nil, nil, s.misplaced(host, "header "+key)
	}
	return v, nil, nil, nil
}

// cgiName is a header name as CGI and WSGI servers key it: lower case
// here, with "_" for "-".
func cgiName(key string) string {
	return strings.ReplaceAll(strings.ToLower(key), "-", "_")
}

// checkUnbound refuses text of a request to host that carries the
// placeholder or the value of a secret not bound to host.
func (p *Policy) checkUnbound(host, where, text string) *secretDenial {
	for _, s := range p.secrets {
		if !s.bound(host) && (strings.Contains(text, s.placeholder) || strings.Contains(text, string(s.value))) {
			return s.denial(host, where)
		}
	}
	return nil
}

// isBearer reports whether v is "Bearer <ph>", the scheme in any case.
func isBearer(v, ph string) bool {
	scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.TrimLeft(token, " ") == ph
}

// basicPassword reports whether a decoded Basic credential is
// "user:<ph>" with ph nowhere in the user.
func basicPassword(cred, ph string) bool {
	user, pass, ok := strings.Cut(cred, ":")
	return ok && pass == ph && !strings.Contains(user, ph)
}

func (s *secret) takesHeader(key string) bool {
	for _, h := range s.Headers {
		if h == key {
			return true
		}
	}
	return false
}

func (s *secret) plainAllowed(host string, port uint16) bool {
	for _, hp := range s.PlainHTTP {
		if hp.Host == host && hp.Port == port {
			return true
		}
	}
	return false
}

// misplaced refuses a placeholder of a secret bound to host found where
// the secret is not substituted.
func (s *secret) misplaced(host, where string) *secretDenial {
	places := "as the whole token of Authorization: Bearer or the password of Authorization: Basic"
	if len(s.Headers) > 0 {
		places += ", or as the whole value of " + strings.Join(s.Headers, ", ")
	}
	return &secretDenial{
		reason: fmt.Sprintf("the placeholder of secret %q is in %s of a request to %s, but it is substituted only %s (%s); the request is refused rather than sent with the placeholder. To put the secret in another header, add it to the secret's headers",
			s.Name, where, host, places, originString(s.Origin)),
		rule: s.Origin,
	}
}

func cutBasic(v string) (scheme, cred string, ok bool) {
	scheme, cred, ok = strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	return scheme, strings.TrimSpace(cred), true
}

// anyBound reports whether some secret may be sent to host.
func (p *Policy) anyBound(host string) bool {
	for _, s := range p.secrets {
		if s.bound(host) {
			return true
		}
	}
	return false
}

func (s *secret) bound(host string) bool {
	for _, hp := range s.Hosts {
		if hp.Match(host) {
			return true
		}
	}
	return false
}

func (s *secret) denial(host, where string) *secretDenial {
	hosts := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		hosts[i] = h.String()
	}
	return &secretDenial{
		reason: fmt.Sprintf("secret %q appears in %s of a request to %s, but it may be sent only to %s; add %s to the secret's hosts in %s to allow it",
			s.Name, where, host, strings.Join(hosts, ", "), host, originString(s.Origin)),
		rule: s.Origin,
	}
}

// maskString replaces every real value in s by its placeholder.
func (p *Policy) maskString(s string) string {
	if p.mask == nil {
		return s
	}
	return p.mask.replaceString(s)
}

// maskHeader masks every value in h in place.
func (p *Policy) maskHeader(h http.Header, extra *replacer) {
	for k, vals := range h {
		for i, v := range vals {
			if extra != nil {
				v = extra.replaceString(v)
			}
			vals[i] = p.maskString(v)
		}
		h[k] = vals
	}
}

// unboundFor returns the secrets that may not go to host, with a replacer
// over their values and placeholders (its replacements are unused;
// heldTail is what bodyScanner needs); nil when every secret may.
func (p *Policy) unboundFor(host string) ([]*secret, *replacer) {
	var out []*secret
	var pairs [][2]string
	for _, s := range p.secrets {
		if !s.bound(host) {
			out = append(out, s)
			pairs = append(pairs, [2]string{string(s.value), ""}, [2]string{s.placeholder, ""})
		}
	}
	if out == nil {
		return nil, nil
	}
	return out, newReplacer(pairs)
}

// bodyScanner passes a request body on while checking that neither the
// value nor the placeholder of the given secrets is in it, even split
// across reads: bytes that could start one are held back until the next
// read settles it, so it holds at most the longest of them less a byte.
// It sees the body as the guest's HTTP framing delivers it (chunked
// bodies de-chunked); a body the guest encoded (gzip, base64) is not
// decoded. On a match it fails the read (the upstream request is aborted
// before the match's last byte leaves) and records the denial.
type bodyScanner struct {
	src     io.ReadCloser
	secrets []*secret
	r       *replacer
	host    string
	buf     []byte
	hold    []byte
	out     []byte
	err     error
	denied  atomic.Pointer[secretDenial]
}

func newBodyScanner(src io.ReadCloser, host string, secrets []*secret, r *replacer) *bodyScanner {
	return &bodyScanner{src: src, secrets: secrets, r: r, host: host, buf: make([]byte, 32<<10)}
}

func (b *bodyScanner) Read(p []byte) (int, error) {
	for {
		if len(b.out) > 0 {
			n := copy(p, b.out)
			b.out = b.out[n:]
			return n, nil
		}
		if b.err != nil {
			if len(b.hold) > 0 && b.err == io.EOF {
				b.out, b.hold = b.hold, nil
				continue
			}
			return 0, b.err
		}
		n, err := b.src.Read(b.buf)
		data := append(b.hold, b.buf[:n]...)
		for _, s := range b.secrets {
			if bytes.Contains(data, s.value) || bytes.Contains(data, []byte(s.placeholder)) {
				d := s.denial(b.host, "the request body")
				if s.bodyOnly {
					d = s.misplacedBody(b.host)
				}
				b.denied.Store(d)
				b.err, b.hold = errors.New(d.reason), nil
				return 0, b.err
			}
		}
		keep := 0
		if err == nil {
			keep = b.r.heldTail(data)
		}
		b.out = data[:len(data)-keep]
		b.hold = append([]byte(nil), data[len(data)-keep:]...)
		b.err = err
	}
}

func (b *bodyScanner) Close() error { return b.src.Close() }
