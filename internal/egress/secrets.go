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

// rewriteRequest substitutes, in every header of a request to host, the
// placeholder of each secret bound to host by its real value (inside a
// Basic credential too), and refuses the request when a placeholder or a
// real value of a secret not bound to host appears in any header, the
// path or the query. Values are substituted in headers only, never in
// URLs or bodies.
func (p *Policy) rewriteRequest(host string, h http.Header, rawURL string) (substitution, *secretDenial) {
	var sub substitution
	if len(p.secrets) == 0 {
		return sub, nil
	}
	used := make(map[string]bool)
	for _, s := range p.secrets {
		if !s.bound(host) && (strings.Contains(rawURL, s.placeholder) || strings.Contains(rawURL, string(s.value))) {
			return sub, s.denial(host, "the URL")
		}
	}
	for key, vals := range h {
		for _, s := range p.secrets {
			lk := strings.ToLower(key)
			if strings.Contains(lk, strings.ToLower(s.placeholder)) || strings.Contains(lk, strings.ToLower(string(s.value))) {
				return sub, s.denial(host, "a header name")
			}
		}
		for i, v := range vals {
			nv, d := p.rewriteValue(host, key, v, used)
			if d != nil {
				return sub, d
			}
			if scheme, cred, ok := cutBasic(v); ok && http.CanonicalHeaderKey(key) == "Authorization" {
				raw, err := base64.StdEncoding.DecodeString(cred)
				if err == nil {
					nraw, d := p.rewriteValue(host, key+" (Basic credential)", string(raw), used)
					if d != nil {
						return sub, d
					}
					if nraw != string(raw) {
						enc := base64.StdEncoding.EncodeToString([]byte(nraw))
						sub.extra = append(sub.extra, [2]string{enc, cred})
						nv = scheme + " " + enc
					}
				}
			}
			vals[i] = nv
		}
	}
	for _, s := range p.secrets {
		if used[s.Name] {
			sub.used = append(sub.used, s.Name)
		}
	}
	return sub, nil
}

func (p *Policy) rewriteValue(host, where, v string, used map[string]bool) (string, *secretDenial) {
	for _, s := range p.secrets {
		hasPH := strings.Contains(v, s.placeholder)
		hasValue := strings.Contains(v, string(s.value))
		if !hasPH && !hasValue {
			continue
		}
		if !s.bound(host) {
			return "", s.denial(host, "header "+where)
		}
		if hasPH {
			v = strings.ReplaceAll(v, s.placeholder, string(s.value))
			used[s.Name] = true
		}
	}
	return v, nil
}

func cutBasic(v string) (scheme, cred string, ok bool) {
	scheme, cred, ok = strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	return scheme, strings.TrimSpace(cred), true
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
// over their values (its replacements are unused; heldTail is what
// bodyScanner needs); nil when every secret may.
func (p *Policy) unboundFor(host string) ([]*secret, *replacer) {
	var out []*secret
	var pairs [][2]string
	for _, s := range p.secrets {
		if !s.bound(host) {
			out = append(out, s)
			pairs = append(pairs, [2]string{string(s.value), ""})
		}
	}
	if out == nil {
		return nil, nil
	}
	return out, newReplacer(pairs)
}

// bodyScanner passes a request body on while checking that no value of
// the given secrets is in it, even split across reads: bytes that could
// start a value are held back until the next read settles it. On a match
// it fails the read (the upstream request is aborted before the value's
// last byte leaves) and records the denial.
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
			if bytes.Contains(data, s.value) {
				d := s.denial(b.host, "the request body")
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
