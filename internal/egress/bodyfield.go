package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Secrets in request bodies. A secret whose binding names body fields
// (policy.BodyField) is substituted in a request to one of those hosts
// and paths only where the whole value of a named field is its
// placeholder: a field of an application/x-www-form-urlencoded body, or
// the string at a JSON path of an application/json body. Such a request's
// body is read whole, up to maxSubstitutedBody (a longer one is refused
// with 413), parsed, rewritten and sent with its new Content-Length. A
// placeholder anywhere else in it — another field, part of a value, a
// key, an escaped form in JSON, a body of another type (multipart), a
// compressed body — refuses the request, as does a JSON body with a
// repeated key in any object or one that is not a single JSON value
// (servers differ on which of two keys wins, so either could be read).
// In the body of any other request to the secret's hosts its placeholder
// refuses the request too (bodyScanner): a secret that opts in to bodies
// goes in the fields it names or nowhere.

// maxSubstitutedBody bounds the body the engine reads whole to
// substitute into: a form or JSON body of a token request or a login is
// a few hundred bytes.
const maxSubstitutedBody = 64 << 10

// errNoPlaceholder is what the substituters return for a body that does
// not carry the placeholder: it goes on unchanged.
var errNoPlaceholder = errors.New("no placeholder")

// substituteForm returns the urlencoded form body with ph replaced by
// value where the whole value of one of fields (decoded) is ph. ph
// anywhere else (decoded, leniently as servers do), or a named field
// given twice, is an error; errNoPlaceholder when ph is nowhere.
func substituteForm(body []byte, fields []string, ph, value string) ([]byte, error) {
	named := func(n string) bool {
		for _, f := range fields {
			if n == f {
				return true
			}
		}
		return false
	}
	pairs := bytes.Split(body, []byte("&"))
	found, seen, malformed := -1, map[string]bool{}, false
	for i, p := range pairs {
		rawName, rawVal, _ := bytes.Cut(p, []byte("="))
		name, val := queryUnescapeLenient(string(rawName)), queryUnescapeLenient(string(rawVal))
		strictName, errN := url.QueryUnescape(string(rawName))
		strictVal, errV := url.QueryUnescape(string(rawVal))
		if errN != nil || errV != nil || strictName != name || strictVal != val {
			// Servers read such a pair differently (or refuse the form):
			// the field the value goes in must be what every one reads.
			malformed = true
			if strings.Contains(name+val, ph) || bytes.Contains(p, []byte(ph)) {
				return nil, errors.New("the placeholder is in a form field that is not well encoded")
			}
			continue
		}
		if named(name) {
			if seen[name] {
				return nil, fmt.Errorf("form field %s is given twice", name)
			}
			seen[name] = true
		}
		switch {
		case strings.Contains(name, ph):
			return nil, errors.New("the placeholder is in a form field's name")
		case !strings.Contains(val, ph):
		case val == ph && named(name) && !strings.Contains(string(rawName), ph):
			found = i
		default:
			return nil, fmt.Errorf("the placeholder is in form field %s, where it is not the whole value of a field it goes in", name)
		}
	}
	if found < 0 {
		if bytes.Contains(body, []byte(ph)) {
			return nil, errors.New("the placeholder is in the body outside the form fields it goes in")
		}
		return nil, errNoPlaceholder
	}
	if malformed {
		return nil, errors.New("the form has a field that is not well encoded (an invalid % escape)")
	}
	if bytes.IndexByte(body, ';') >= 0 {
		// Some servers split fields at a bare ';' too, others refuse the
		// form: the field the value goes in must be what every one reads.
		return nil, errors.New("the form has a bare ';', which servers read differently (some as a field separator); encode it as %3B")
	}
	rawName, _, _ := bytes.Cut(pairs[found], []byte("="))
	pairs[found] = append(append(append([]byte(nil), rawName...), '='), url.QueryEscape(value)...)
	out := bytes.Join(pairs, []byte("&"))
	if n := bytes.Count(out, []byte(ph)); n != 0 {
		return nil, errors.New("the placeholder is in the body outside the form fields it goes in")
	}
	return out, nil
}

// substituteJSON returns the JSON body with ph replaced by value where
// the whole string at one of paths (dot-separated object keys) is ph,
// written as is (no escape in it). The body must be one JSON value with
// no repeated key in any object; ph anywhere else — in another string,
// a key, part of a string, an escaped spelling of it — is an error;
// errNoPlaceholder when ph is nowhere.
func substituteJSON(body []byte, paths []string, ph, value string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := jsonWalk{dec: dec, body: body, paths: paths, ph: ph, start: -1}
	if err := w.value(nil, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the body is not a single JSON value")
	}
	if w.start < 0 {
		if bytes.Contains(body, []byte(ph)) {
			return nil, errors.New("the placeholder is in the body outside the JSON fields it goes in")
		}
		return nil, errNoPlaceholder
	}
	enc, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	out := append(append(append([]byte(nil), body[:w.start]...), enc...), body[w.end:]...)
	if bytes.Contains(out, []byte(ph)) {
		return nil, errors.New("the placeholder is in the body outside the JSON fields it goes in")
	}
	return out, nil
}

// jsonWalk walks a JSON document token by token, checking every key and
// string for the placeholder and finding the one allowed place.
type jsonWalk struct {
	dec        *json.Decoder
	body       []byte
	paths      []string
	ph         string
	start, end int
}

// maxJSONDepth bounds the nesting the walk follows (its recursion).
const maxJSONDepth = 64

func (w *jsonWalk) value(path []string, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("the JSON body nests deeper than %d", maxJSONDepth)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return errors.New("the body is not valid JSON")
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			keys := map[string]bool{}
			for w.dec.More() {
				kt, err := w.dec.Token()
				if err != nil {
					return errors.New("the body is not valid JSON")
				}
				k, _ := kt.(string)
				if keys[k] {
					return fmt.Errorf("a JSON object has key %q twice", k)
				}
				keys[k] = true
				if strings.Contains(k, w.ph) {
					return errors.New("the placeholder is in a JSON key")
				}
				if err := w.value(append(path, k), depth+1); err != nil {
					return err
				}
			}
		case '[':
			for w.dec.More() {
				// An element is at no object path: "[]" is no key
				// (CheckJSONPath allows letters, digits, _ and - only).
				if err := w.value(append(path, "[]"), depth+1); err != nil {
					return err
				}
			}
		}
		if _, err := w.dec.Token(); err != nil {
			return errors.New("the body is not valid JSON")
		}
	case string:
		if !strings.Contains(t, w.ph) {
			return nil
		}
		p := strings.Join(path, ".")
		end := int(w.dec.InputOffset())
		start := end - len(w.ph) - 2
		switch {
		case t != w.ph || !w.isPath(p):
			return fmt.Errorf("the placeholder is in the JSON string at %s, where it is not the whole value of a field it goes in", jsonPathLabel(p))
		case start < 0 || string(w.body[start:end]) != strconv.Quote(w.ph):
			return fmt.Errorf("the placeholder at %s is written with escapes; write it as it is", p)
		}
		w.start, w.end = start, end
	}
	return nil
}

func (w *jsonWalk) isPath(p string) bool {
	for _, q := range w.paths {
		if p == q {
			return true
		}
	}
	return false
}

func jsonPathLabel(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

// bodyKind is what a request's Content-Type makes its body for
// substitution: "form", "json" or "" (neither).
func bodyKind(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case err != nil:
		return ""
	case mt == "application/x-www-form-urlencoded":
		return "form"
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return "json"
	}
	return ""
}

// bodyDenial is a request refused over its body, with the status.
type bodyDenial struct {
	*secretDenial
	status int
}

// rewriteBody substitutes, in a request to host on port, the secrets
// whose body fields name the request's host and path (see the comment at
// the top of this file). It returns the secrets substituted, or why the
// request is refused. A request no body field names is left alone here.
func (p *Policy) rewriteBody(host string, port uint16, isTLS bool, r *http.Request) ([]string, *bodyDenial) {
	type place struct {
		s                *secret
		forms, jsonPaths []string
	}
	var places []place
	path := r.URL.EscapedPath()
	for _, s := range p.secrets {
		if len(s.Body) == 0 || !s.bound(host) {
			continue
		}
		pl := place{s: s}
		for _, b := range s.Body {
			if b.Host != host || b.Path != path {
				continue
			}
			if b.Form != "" {
				pl.forms = append(pl.forms, b.Form)
			} else {
				pl.jsonPaths = append(pl.jsonPaths, b.JSON)
			}
		}
		if pl.forms != nil || pl.jsonPaths != nil {
			places = append(places, pl)
		}
	}
	if len(places) == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	refuse := func(s *secret, status int, format string, args ...any) *bodyDenial {
		return &bodyDenial{status: status, secretDenial: &secretDenial{
			reason: fmt.Sprintf("secret %q: ", s.Name) + fmt.Sprintf(format, args...) +
				fmt.Sprintf("; it is substituted in a request body only as the whole value of a field its body blocks name (%s)", originString(s.Origin)),
			rule: s.Origin}}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSubstitutedBody+1))
	r.Body.Close()
	if err != nil {
		return nil, refuse(places[0].s, http.StatusBadRequest, "reading the request body failed: %s", oneLine(err.Error()))
	}
	if len(body) > maxSubstitutedBody {
		return nil, refuse(places[0].s, http.StatusRequestEntityTooLarge, "the body of a request to %s%s is larger than %d bytes, the most the host reads to substitute into", host, path, maxSubstitutedBody)
	}
	kind := bodyKind(r.Header)
	coding := contentCoding(r.Header)
	var used []string
	for _, pl := range places {
		s := pl.s
		var out []byte
		var err error
		switch {
		case coding != "":
			if len(body) > 0 {
				return nil, refuse(s, http.StatusForbidden, "the body of a request to %s%s is %s-encoded, which the host does not decode to find the field", host, path, coding)
			}
			err = errNoPlaceholder
		case kind == "form" && pl.forms != nil:
			out, err = substituteForm(body, pl.forms, s.placeholder, string(s.value))
		case kind == "json" && pl.jsonPaths != nil:
			out, err = substituteJSON(body, pl.jsonPaths, s.placeholder, string(s.value))
		case bytes.Contains(body, []byte(s.placeholder)):
			ct := r.Header.Get("Content-Type")
			if ct == "" {
				ct = "no content type"
			}
			return nil, refuse(s, http.StatusForbidden, "the placeholder is in a body of %s to %s%s, not in the form or JSON body its field is in", oneLine(ct), host, path)
		default:
			err = errNoPlaceholder
		}
		switch {
		case err == errNoPlaceholder:
			continue
		case err != nil:
			return nil, refuse(s, http.StatusForbidden, "in a request to %s%s, %s", host, path, err.Error())
		}
		if !isTLS && !s.plainAllowed(host, port) {
			return nil, &bodyDenial{status: http.StatusForbidden, secretDenial: &secretDenial{
				reason: fmt.Sprintf("secret %q would be sent unencrypted to %s:%d; use https, or add \"%s:%d\" to the secret's plain_http in %s if this is a local fixture",
					s.Name, host, port, host, port, originString(s.Origin)),
				rule: s.Origin}}
		}
		body = out
		used = append(used, s.Name)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return used, nil
}

// bodyOnlyFor returns, for a request to host whose path is path, the
// secrets bound to host that name body fields, none of them for this
// request, as secrets for bodyScanner whose placeholder in the body
// refuses the request (their value is the placeholder too: the guest
// never has the value).
func (p *Policy) bodyOnlyFor(host, path string) []*secret {
	var out []*secret
	for _, s := range p.secrets {
		if len(s.Body) == 0 || !s.bound(host) {
			continue
		}
		routed := false
		for _, b := range s.Body {
			routed = routed || b.Host == host && b.Path == path
		}
		if !routed {
			out = append(out, &secret{SecretBinding: s.SecretBinding, value: []byte(s.placeholder), placeholder: s.placeholder, bodyOnly: true})
		}
	}
	return out
}

// misplacedBody refuses a placeholder in the body of a request to one of
// the secret's hosts that none of its body fields names.
func (s *secret) misplacedBody(host string) *secretDenial {
	var places []string
	for _, b := range s.Body {
		places = append(places, b.Key())
	}
	return &secretDenial{
		reason: fmt.Sprintf("the placeholder of secret %q is in the body of a request to %s, but it is substituted in bodies only as the whole value of %s (%s); the request is refused rather than sent with the placeholder",
			s.Name, host, strings.Join(places, ", "), originString(s.Origin)),
		rule: s.Origin,
	}
}
