package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/policy"
)

// loginSecret is an OAuth secret: its tokens and placeholders change as
// the login is refreshed, so they are asked of the login at each request
// rather than compiled in.
type loginSecret struct {
	policy.SecretBinding
	login     *oauth.Login
	tokenHost string
	tokenPort uint16
	tokenPath string
}

func (c *Policy) addLogin(b policy.SecretBinding, l *oauth.Login) error {
	if l == nil {
		return fmt.Errorf("secret %q is an OAuth login, but no login was opened on its credential file", b.Name)
	}
	u, err := url.Parse(b.OAuth.TokenURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("secret %q: its token endpoint is not an https URL", b.Name)
	}
	port := uint16(443)
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return fmt.Errorf("secret %q: its token endpoint's port is not a number", b.Name)
		}
		port = uint16(n)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	c.logins = append(c.logins, &loginSecret{SecretBinding: b, login: l, tokenHost: canonicalName(u.Hostname()), tokenPort: port, tokenPath: path})
	return nil
}

// as is the login seen as a secret, for the checks and refusals they
// share (bound, plainAllowed, denial, misplaced).
func (ls *loginSecret) as() *secret { return &secret{SecretBinding: ls.SecretBinding} }

// texts are the strings that must not reach the wrong place: every
// placeholder the login minted and its current real tokens, with the
// signature of each JWT among them (the part that is the secret).
func (ls *loginSecret) texts() []string {
	out := ls.login.Placeholders()
	for _, m := range ls.login.Masks() {
		out = append(out, m[0])
	}
	var sigs []string
	for _, t := range out {
		if i := strings.LastIndexByte(t, '.'); i > 0 && strings.Count(t, ".") == 2 && len(t)-i-1 >= minSecretLen {
			sigs = append(sigs, t[i+1:])
		}
	}
	return append(out, sigs...)
}

func containsAny(s string, texts []string) bool {
	for _, t := range texts {
		if t != "" && strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// refreshFor returns the login whose token endpoint a request is: a POST
// over TLS to the endpoint's host, port and path.
func (p *Policy) refreshFor(host string, port uint16, isTLS bool, r *http.Request) *loginSecret {
	if !isTLS || r.Method != http.MethodPost {
		return nil
	}
	for _, ls := range p.logins {
		if ls.tokenHost == host && ls.tokenPort == port && r.URL.EscapedPath() == ls.tokenPath {
			return ls
		}
	}
	return nil
}

// rewriteLogins puts each login's real access token where the guest's
// request to host carries one of its access placeholders as the whole
// token of "Authorization: Bearer", when the login's secret is bound to
// host; any other place of a login's placeholder or token (another
// header, the URL, a request to a host it is not bound to) refuses the
// request, as for other secrets. It returns the logins used and the
// (real, placeholder) pairs to mask in the response.
func (p *Policy) rewriteLogins(host string, port uint16, isTLS bool, h http.Header, rawURL string) ([]string, [][2]string, *secretDenial) {
	if len(p.logins) == 0 {
		return nil, nil, nil
	}
	var used []string
	var pairs [][2]string
	for _, ls := range p.logins {
		s, texts := ls.as(), ls.texts()
		if containsAny(rawURL, texts) {
			if !s.bound(host) {
				return nil, nil, s.denial(host, "the URL")
			}
			return nil, nil, s.misplaced(host, "the URL")
		}
		for key, vals := range h {
			lk := strings.ToLower(key)
			if containsAny(key, texts) {
				return nil, nil, s.denial(host, "a header name")
			}
			for i, v := range vals {
				if !containsAny(v, texts) {
					continue
				}
				if !s.bound(host) {
					return nil, nil, s.denial(host, "header "+lk)
				}
				scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
				tok = strings.TrimLeft(tok, " ")
				real, isAccess := ls.login.AccessToken(tok)
				if lk != "authorization" || !ok || !strings.EqualFold(scheme, "Bearer") || !isAccess || len(vals) > 1 {
					return nil, nil, s.misplaced(host, "header "+lk)
				}
				if !isTLS && !s.plainAllowed(host, port) {
					return nil, nil, &secretDenial{
						reason: fmt.Sprintf("secret %q would be sent unencrypted to %s:%d; use https, or add \"%s:%d\" to the secret's plain_http in %s if this is a local fixture",
							ls.Name, host, port, host, port, originString(ls.Origin)),
						rule: ls.Origin,
					}
				}
				vals[i] = "Bearer " + real
				used = append(used, ls.Name)
				pairs = append(pairs, [2]string{real, tok})
			}
		}
	}
	for _, ls := range p.logins {
		for _, m := range ls.login.Masks() {
			pairs = append(pairs, maskForms(m[0], m[1])...)
			if i := strings.LastIndexByte(m[0], '.'); i > 0 && strings.Count(m[0], ".") == 2 {
				if j := strings.LastIndexByte(m[1], '.'); j > 0 && len(m[0])-i-1 >= minSecretLen {
					pairs = append(pairs, [2]string{m[0][i+1:], m[1][j+1:]})
				}
			}
		}
	}
	// Longer olds first, so that a whole token wins over its signature.
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i][0]) > len(pairs[j][0]) })
	return used, pairs, nil
}

// loginScanSecrets are, for the body scanner, the logins' texts of those
// not bound to host, each as a secret whose value is the text.
func (p *Policy) loginScanSecrets(host string) []*secret {
	var out []*secret
	for _, ls := range p.logins {
		if ls.as().bound(host) {
			continue
		}
		for _, t := range ls.texts() {
			out = append(out, &secret{SecretBinding: ls.SecretBinding, value: []byte(t), placeholder: t})
		}
	}
	return out
}

// serveRefresh brokers a guest's request to a login's token endpoint
// (oauth.Login.Refresh): the body is read whole (bounded), refreshed
// with the real refresh token through the engine's own transport (its
// TLS verification and hosts mappings), and the reply, with placeholders
// only, written to the guest. One audit entry records it; a refusal is a
// deny.
func (e *Engine) serveRefresh(w http.ResponseWriter, r *http.Request, f *flow, st *state, ls *loginSecret, en *audit.Entry) {
	en.Secrets = []string{ls.Name}
	*en = withOrigin(*en, ls.Origin)
	body, err := io.ReadAll(io.LimitReader(r.Body, oauth.MaxRequestBody+1))
	if err != nil {
		en.Decision, en.Reason, en.Status = audit.DecisionDeny, "reading the refresh request: "+oneLine(err.Error()), http.StatusBadRequest
		writeDenial(w, http.StatusBadRequest, en.Reason)
		return
	}
	authority := f.name
	if f.port != 443 {
		authority = net.JoinHostPort(f.name, strconv.Itoa(int(f.port)))
	}
	up := func(ctx context.Context, ct string, b []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+authority+ls.tokenPath, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Accept-Encoding", "identity")
		if ua := r.Header.Get("User-Agent"); ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		return st.transport.RoundTrip(req)
	}
	reply, err := ls.login.Refresh(r.Context(), r.Header.Get("Content-Type"), body, up)
	if err != nil {
		reason := "refreshing secret." + ls.Name + " failed: " + oneLine(err.Error())
		en.Decision, en.Reason, en.Status = audit.DecisionDeny, reason, http.StatusBadGateway
		writeDenial(w, http.StatusBadGateway, reason)
		return
	}
	for k, vs := range reply.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(reply.Body)))
	w.WriteHeader(reply.Status)
	w.Write(reply.Body)
	en.Status = reply.Status
	en.BytesUp = int64(len(body))
	switch {
	case reply.Refused != "":
		en.Decision, en.Reason = audit.DecisionDeny, reply.Refused
	case reply.WriteBack != nil:
		en.Decision, en.Reason = audit.DecisionAllow, "the new tokens could not be written to the credential file: "+oneLine(reply.WriteBack.Error())
	case reply.Upstream:
		en.Decision, en.Reason = audit.DecisionAllow, "refreshed at the token endpoint"
	default:
		en.Decision, en.Reason = audit.DecisionAllow, "answered from the credential file, refreshed already"
	}
}

// loginBound reports whether some login's secret may be sent to host.
func (p *Policy) loginBound(host string) bool {
	for _, ls := range p.logins {
		if ls.as().bound(host) {
			return true
		}
	}
	return false
}

// scanFor is unboundFor with the logins not bound to host added: the
// secrets whose values and placeholders a request body to host must not
// carry, and a replacer over them for bodyScanner's held tail.
func (p *Policy) scanFor(host string) ([]*secret, *replacer) {
	unbound, r := p.unboundFor(host)
	extra := p.loginScanSecrets(host)
	if len(extra) == 0 {
		return unbound, r
	}
	var pairs [][2]string
	for _, s := range append(unbound, extra...) {
		pairs = append(pairs, [2]string{string(s.value), ""}, [2]string{s.placeholder, ""})
	}
	return append(unbound, extra...), newReplacer(pairs)
}
