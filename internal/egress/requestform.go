package egress

import (
	"net/http"
	"strings"

	"github.com/sbx-dev/sbx/internal/egress/gitpush"
)

// requestForm is what the allow rules' request lists look at in one
// guest request.
type requestForm struct {
	// method is the request's method as the guest sent it (and as it goes
	// upstream): compared case-sensitively.
	method string
	// target is the request target the upstream receives, without its
	// query: the escaped path (url.URL.RequestURI, which both of Go's
	// transports write, cut at "?"). Path rules are checked on exactly it.
	target string
	// query is the raw query.
	query  string
	header http.Header
	// receivePack: the request may be a git push (gitpush.IsReceivePack).
	receivePack bool
}

// formOf reads a guest request's form. The target is taken from the URL
// the reverse proxy copies to the outgoing request, so that what the
// rules judged is the very target the upstream gets: an absolute-form
// request line ("GET https://host/p") goes upstream in origin form ("/p")
// and is judged so; "*" and opaque targets are judged as written and
// match no path rule.
func formOf(r *http.Request) requestForm {
	target, _, _ := strings.Cut(r.URL.RequestURI(), "?")
	q := requestForm{method: r.Method, target: target, query: r.URL.RawQuery, header: r.Header}
	method := r.Method
	if methodOverride(r.Header, r.URL.RawQuery) != "" {
		method = http.MethodPost // a server may read it as anything
	}
	q.receivePack = gitpush.IsReceivePack(method, target, q.query, strings.Join(r.Header.Values("Content-Type"), ","))
	return q
}

// overrideHeaders are the headers that frameworks read as the request's
// real method (Rails and Rack, Symfony and Laravel, Express's
// method-override, ASP.NET, Google's and Microsoft's APIs), lower case.
var overrideHeaders = []string{"x-http-method-override", "x-http-method", "x-method-override"}

// pathHeaders are the headers that some servers route by instead of the
// request target (IIS's URL Rewrite module, Zend Framework 1, Symfony
// before 2.8.44), lower case.
var pathHeaders = []string{"x-original-url", "x-rewrite-url"}

// pathOverride returns what in h asks the server to route the request
// by another path, or "": one of pathHeaders in any case, "_" for "-"
// included (as methodOverride reads header names).
func pathOverride(h http.Header) string {
	for k := range h {
		n := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		for _, o := range pathHeaders {
			if n == o {
				return "a " + k + " header"
			}
		}
	}
	return ""
}

// methodOverride returns what in a request asks the server to treat it
// as another method, or "": one of overrideHeaders in any case, "_" for
// "-" included (servers that map header names to CGI variables read
// X_HTTP_METHOD_OVERRIDE as X-HTTP-Method-Override), or a "_method"
// query parameter in any case, percent-encoded or not, "&" or ";"
// separated, with PHP's name mangling (" " and "." read as "_", a "[...]"
// suffix dropped).
func methodOverride(h http.Header, rawQuery string) string {
	for k := range h {
		n := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		for _, o := range overrideHeaders {
			if n == o {
				return "a " + k + " header"
			}
		}
	}
	for _, kv := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(kv, "=")
		if isMethodParam(name) {
			return "a _method query parameter (" + name + ")"
		}
	}
	return ""
}

// isMethodParam reports whether a raw query parameter name reads as
// "_method" to some server.
func isMethodParam(raw string) bool {
	n := raw
	for i := 0; i < 4; i++ {
		d := queryUnescapeLenient(n)
		if d == n {
			break
		}
		n = d
	}
	n = strings.ToLower(strings.TrimLeft(n, " "))
	if i := strings.IndexByte(n, '['); i >= 0 {
		n = n[:i]
	}
	n = strings.Map(func(r rune) rune {
		if r == ' ' || r == '.' {
			return '_'
		}
		return r
	}, n)
	return n == "_method"
}

// queryUnescapeLenient decodes "+" and each valid %XX of s and leaves
// invalid escapes as they are.
func queryUnescapeLenient(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '+':
			b = append(b, ' ')
		case s[i] == '%' && i+2 < len(s) && hexVal(s[i+1]) >= 0 && hexVal(s[i+2]) >= 0:
			b = append(b, byte(hexVal(s[i+1])<<4|hexVal(s[i+2])))
			i += 2
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
