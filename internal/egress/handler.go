package egress

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/gitpush"
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// requestState travels with a request through the reverse proxy.
type requestState struct {
	st        *state
	scheme    string
	authority string
	name      string    // the connection's host
	mask      *replacer // values and per-request forms to mask; nil: none
	// aws, for a request signed with an AWS placeholder credential,
	// re-signs it with the real one (aws.go).
	aws *awsRequest
	// toSecretsHost: a secret went into the request or may go to its host.
	toSecretsHost bool
	ws            *wsConn // the upgraded stream, once the upstream switched
	scan          *bodyScanner
	status        int
	upErr         string
}

type requestStateKey struct{}

func requestStateOf(r *http.Request) *requestState {
	rs, _ := r.Context().Value(requestStateKey{}).(*requestState)
	return rs
}

// handle decides one guest request and proxies it when allowed. In order:
// the connection's host must still be allowed as it was; CONNECT is
// refused; the request's Host (or :authority), port stripped, must be the
// connection's name (a port in it is not compared); the allow
// rules' methods and paths must admit it; secrets are substituted or the
// request refused (and never substituted into plain HTTP unless the
// secret names the destination in plain_http); with secrets in the policy
// an upgrade must be to WebSocket (wsmask.go); a git push is held to its
// rule's refs; the body is scanned for the values and placeholders of
// secrets not bound to the host. Every request gets one audit entry (a
// WebSocket's when its stream ends, with the refusal that ended it if one
// did).
func (e *Engine) handle(w http.ResponseWriter, r *http.Request, f *flow, isTLS bool) {
	start := time.Now()
	st := e.cur.Load()
	pol := st.pol
	en := audit.Entry{Name: f.name, Port: f.port, Method: r.Method, Path: r.URL.Path, Proto: protoOf(r, isTLS)}
	cw := &countingWriter{ResponseWriter: w}
	defer func() {
		en.Duration = time.Since(start)
		en.BytesDown = cw.n.Load()
		if en.Status == 0 {
			en.Status = cw.status
		}
		// The guest may type a value it learnt anywhere; the log keeps none.
		en.Path, en.Reason = pol.maskString(en.Path), pol.maskString(en.Reason)
		e.audit(en)
	}()
	deny := func(status int, reason string, rule policy.Origin) {
		reason = pol.maskString(reason)
		en = withOrigin(en, rule)
		en.Decision, en.Reason = audit.DecisionDeny, reason
		writeRefusal(cw, r, status, reason)
		en.Status = cw.status // 200 for a gRPC call, which has its status in grpc-status
	}

	if k := pol.flowKind(f.name, f.port); k != f.kind {
		deny(http.StatusForbidden, fmt.Sprintf("%s:%d is no longer allowed by the sandbox's egress policy", f.name, f.port), policy.Origin{})
		return
	}
	if r.Method == http.MethodConnect {
		deny(http.StatusForbidden, "CONNECT is not allowed: the sandbox reaches hosts by name, one connection per host", pol.ruleFor(f.name, f.port))
		return
	}
	// A port in Host is not compared: the upstream request always goes to
	// the connection's own port with the connection's authority.
	if host, _ := splitHostPort(r.Host); canonicalName(host) != f.name {
		deny(http.StatusForbidden, fmt.Sprintf("request for host %q on a connection to %s:%d (domain fronting is not allowed; connect to that host instead)", r.Host, f.name, f.port), pol.ruleFor(f.name, f.port))
		return
	}
	dropConnectionListed(r.Header)
	v := pol.checkRequest(f.name, formOf(r))
	if !v.allowed {
		deny(http.StatusForbidden, v.reason, v.rule)
		return
	}
	en = withOrigin(en, v.rule)
	if v.scanForm != "" && r.Body != nil && r.Body != http.NoBody {
		r.Body = newFormOverrideScanner(r.Body, v.scanForm)
	}
	if ls := pol.refreshFor(f.name, f.port, isTLS, r); ls != nil {
		e.serveRefresh(cw, r, f, st, ls, &en)
		return
	}

	// A request signed with an AWS placeholder credential is verified
	// before placeholders are looked for; its signature is then removed
	// (and made again with the real credential just before it leaves).
	awsReq, d := pol.checkAWS(f.name, isTLS, r)
	if d != nil {
		deny(http.StatusForbidden, d.reason, d.rule)
		return
	}
	unescaped, _ := url.QueryUnescape(r.URL.RawQuery)
	sub, d := pol.rewriteRequest(f.name, f.port, isTLS, r.Header, r.RequestURI+" "+r.URL.Path+" "+unescaped)
	if d != nil {
		deny(http.StatusForbidden, d.reason, d.rule)
		return
	}
	loginsUsed, loginPairs, d := pol.rewriteLogins(f.name, f.port, isTLS, r.Header, r.RequestURI+" "+r.URL.Path+" "+unescaped)
	if d != nil {
		deny(http.StatusForbidden, d.reason, d.rule)
		return
	}
	sub.used = append(sub.used, loginsUsed...)
	bodyUsed, bd := pol.rewriteBody(f.name, f.port, isTLS, r)
	if bd != nil {
		deny(bd.status, bd.reason, bd.rule)
		return
	}
	sub.used = append(sub.used, bodyUsed...)
	en.Secrets = sub.used
	if awsReq != nil {
		en.Secrets = append(en.Secrets, awsReq.cred.binding.Name)
	}
	toSecretsHost := len(en.Secrets) > 0 || pol.anyBound(f.name) || pol.loginBound(f.name)
	if toSecretsHost {
		// The upstream may echo the credential, which masking must see
		// as ASCII: the guest may not choose the charset of the answer.
		dropCharsetAsks(r.Header)
		// A range of the response is a part of it: an upstream echoing
		// the credential would return it cut where the guest chose, which
		// masking could not recognise; and a host a secret goes to may
		// keep what it was sent and serve it later, to a request that
		// carries no secret. Apache httpd reads Request-Range (early
		// Netscape's name for it) as Range.
		r.Header.Del("Range")
		r.Header.Del("If-Range")
		r.Header.Del("Request-Range")
	}
	if reason := pol.upgradeRefusal(r.Header); reason != "" {
		deny(http.StatusForbidden, reason, pol.ruleFor(f.name, f.port))
		return
	}

	if v.pushRefs != nil {
		body, reason := e.checkPush(cw, r, f, v.pushRefs)
		if body == nil {
			en.Decision, en.Reason, en.Status = audit.DecisionDeny, reason, http.StatusOK
			return
		}
		r.Body = body
	}

	scheme, defPort := "http", uint16(80)
	if isTLS {
		scheme, defPort = "https", 443
	}
	authority := f.name
	if f.port != defPort {
		authority = net.JoinHostPort(f.name, strconv.Itoa(int(f.port)))
	}
	rs := &requestState{st: st, scheme: scheme, authority: authority, name: f.name, toSecretsHost: toSecretsHost, aws: awsReq}
	if pol.mask != nil || len(loginPairs) > 0 {
		extra := append(sub.extra, loginPairs...)
		switch {
		case pol.mask == nil:
			rs.mask = newReplacer(extra)
		case len(extra) == 0:
			rs.mask = pol.mask
		default:
			rs.mask = pol.mask.withPairs(extra, pol.maskPairs)
		}
		// Bodies are masked as they stream; ask for them uncompressed so
		// that a value in them is seen.
		r.Header.Set("Accept-Encoding", "identity")
		offerNoWSExtensions(r.Header)
	}
	// Request trailers would go upstream unchecked; nothing a guest needs
	// sends them.
	r.Trailer = nil
	cw.mask = rs.mask
	cr := &countingReader{r: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = cr
		unbound, rep := pol.scanFor(f.name)
		if only := pol.bodyOnlyFor(f.name, r.URL.EscapedPath()); only != nil {
			unbound = append(unbound, only...)
			var pairs [][2]string
			for _, s := range unbound {
				pairs = append(pairs, [2]string{string(s.value), ""}, [2]string{s.placeholder, ""})
			}
			rep = newReplacer(pairs)
		}
		if unbound != nil {
			rs.scan = newBodyScanner(r.Body, f.name, unbound, rep)
			r.Body = rs.scan
		}
	}
	if awsReq != nil {
		// Signed last, over the headers as they leave.
		sig, err := awsReq.resign(r, authority)
		if err != nil {
			deny(http.StatusForbidden, awsReq.cred.refuse(f.name, "re-signing it: "+err.Error()).reason, awsReq.cred.binding.Origin)
			return
		}
		// An upstream that echoes the request would hand the guest a
		// signature made with the real key: it sees its own instead.
		rs.mask = pol.mask.withPairs(append(sub.extra, [2]string{sig, awsReq.auth.Signature}), pol.maskPairs)
		cw.mask = rs.mask
	}
	e.proxy.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), requestStateKey{}, rs)))
	if rs.mask != nil {
		// What is in the header map now goes to the guest as trailers
		// once handle returns. Those of a response with a body were
		// masked as it ended; a 204, a 304 or a HEAD response has none
		// to end, yet an HTTP/2 upstream can send it trailers.
		for _, vals := range cw.Header() {
			for i, v := range vals {
				vals[i] = rs.mask.replaceString(v)
			}
		}
	}
	en.BytesUp = cr.n.Load()
	en.Status = rs.status
	if reason, rule, refused := rs.streamRefusal(); refused {
		if rule.Block != "" {
			en = withOrigin(en, rule)
		}
		en.Decision, en.Reason = audit.DecisionDeny, reason
		return
	}
	if rs.upErr != "" {
		en.Decision, en.Reason, en.Status = audit.DecisionDeny, rs.upErr, cw.status
		return
	}
	en.Decision = audit.DecisionAllow
}

// dropConnectionListed removes the headers that h's Connection header
// names, as the reverse proxy does on the way (they are hop-by-hop then),
// so that the rules judge the headers the upstream gets: a Content-Type
// named there would otherwise be seen here and not by the server, which
// may then parse the body as a form. Upgrade stays: the proxy keeps it on
// an upgrade request, and upgradeRefusal judges it.
func dropConnectionListed(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" && !strings.EqualFold(f, "upgrade") {
				h.Del(f)
			}
		}
	}
}

func protoOf(r *http.Request, isTLS bool) string {
	switch {
	case strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		return "ws"
	case r.ProtoMajor == 2:
		return "h2"
	case isTLS:
		return "https"
	default:
		return "http"
	}
}

func splitHostPort(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return hostport, ""
}

// writeDenial answers a refused request with a one-line reason.
func writeDenial(w http.ResponseWriter, status int, reason string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, "sbx egress: "+oneLine(reason)+"\n")
}

// oneLine keeps a reason on one printable line: parts of it (hosts,
// paths) come from the guest.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// checkPush reads a git push's ref-update commands and returns the body
// to send upstream (the commands replayed, then the rest), or nil after
// answering the client with a receive-pack refusal that git prints.
func (e *Engine) checkPush(w http.ResponseWriter, r *http.Request, f *flow, refs []*match.Ref) (io.ReadCloser, string) {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		reason := fmt.Sprintf("a git push with a %s-encoded body cannot be checked against the rule's refs", ce)
		writeDenial(w, http.StatusForbidden, reason)
		return nil, reason
	}
	cmds, consumed, caps, err := gitpush.ParseCommands(r.Body, e.opts.MaxPushCommands)
	if err != nil {
		reason := "reading the push's ref updates: " + err.Error()
		writeDenial(w, http.StatusForbidden, reason)
		return nil, reason
	}
	var bad []string
	for _, c := range cmds {
		if !match.AnyRef(refs, c.Ref) {
			bad = append(bad, c.Ref)
		}
	}
	if len(bad) == 0 {
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(consumed), r.Body), r.Body}, ""
	}
	rule := e.cur.Load().pol.ruleFor(f.name, f.port)
	pats := make([]string, len(refs))
	for i, p := range refs {
		pats[i] = p.String()
	}
	reason := fmt.Sprintf("sbx egress: pushes to %s may update only %s (%s); refused %s",
		f.name, strings.Join(pats, ", "), originString(rule), strings.Join(bad, ", "))
	// The client sends the whole pack before it reads the answer; read it
	// (bounded) so that it gets to print the refusal.
	if n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, e.opts.MaxRefusedPushBody)); n >= e.opts.MaxRefusedPushBody {
		w.Header().Set("Connection", "close")
	}
	if err := gitpush.Reject(w, cmds, caps, oneLine(reason)); err != nil {
		e.opts.Logger.Debug("writing a git push refusal", "err", err)
	}
	return nil, reason
}

// rewrite points the outgoing request at the flow's upstream. Headers
// were already rewritten by handle; ReverseProxy has dropped hop-by-hop
// headers and adds no X-Forwarded-* (the guest's addresses stay inside).
func (e *Engine) rewrite(pr *httputil.ProxyRequest) {
	rs := requestStateOf(pr.In)
	pr.Out.URL.Scheme = rs.scheme
	pr.Out.URL.Host = rs.authority
	pr.Out.Host = rs.authority
}

// modifyResponse masks every secret value in what comes back: headers
// (Location included), the body as it streams, and trailers. Bodies are
// masked uncompressed: a gzip body is decoded (and sent on without its
// Content-Encoding); any other encoding is refused, since a value inside
// it could not be seen. An upgraded stream must be a WebSocket, whose
// frames are masked (and the guest's checked) by the wsConn that upgraded
// puts in place of the body.
func (e *Engine) modifyResponse(res *http.Response) error {
	rs := requestStateOf(res.Request)
	rs.status = res.StatusCode
	if rs.mask != nil {
		rs.st.pol.maskHeader(res.Header, rs.mask)
	}
	if isGRPCTrailersOnly(res) {
		return &grpcTrailersOnly{header: res.Header}
	}
	if rs.mask == nil {
		return nil
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		return e.upgraded(rs, res)
	}
	if isGRPCResponse(res) && res.Body != nil && res.Body != http.NoBody {
		// Masked message by message, each whole: see grpc.go.
		res.Body = newGRPCMasker(rs.mask, res, maxGRPCMessage)
		return nil
	}
	if res.Body == nil || res.Body == http.NoBody ||
		res.Request.Method == http.MethodHead || res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified {
		return nil
	}
	if cs := unmaskableCharset(res.Header); cs != "" && rs.toSecretsHost {
		return fmt.Errorf("the upstream sent a body in charset %q, in which a secret's value could not be recognised", cs)
	}
	body := res.Body
	switch ce := contentCoding(res.Header); ce {
	case "":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			return fmt.Errorf("decoding the upstream's gzip body to mask secrets: %v", err)
		}
		body = struct {
			io.Reader
			io.Closer
		}{zr, res.Body}
		res.Header.Del("Content-Encoding")
	default:
		return fmt.Errorf("the upstream sent a %s-encoded body, which cannot be checked for secret values", ce)
	}
	res.Header.Del("Content-Length")
	res.ContentLength = -1
	res.Body = newMaskReader(rs.mask, body, func() {
		for _, vals := range res.Trailer {
			for i, v := range vals {
				vals[i] = rs.mask.replaceString(v)
			}
		}
	})
	return nil
}

// contentCoding returns the one content coding h names, lower case, or
// "" for none: every Content-Encoding line counts (a client decodes by
// all of them), "identity" names none, and more than one coding is
// returned as the list, which no case of modifyResponse accepts.
func contentCoding(h http.Header) string {
	var codings []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	return strings.Join(codings, ", ")
}

// upstreamError answers a request the upstream did not: 502, or 504 for
// a timeout, with a one-line reason that carries no secret value.
func (e *Engine) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	rs := requestStateOf(r)
	if t := (*grpcTrailersOnly)(nil); errors.As(err, &t) {
		t.write(w)
		return
	}
	status := http.StatusBadGateway
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
	}
	msg := err.Error()
	if rs != nil {
		msg = rs.st.pol.maskString(msg)
		if rs.mask != nil {
			msg = rs.mask.replaceString(msg)
		}
	}
	reason := "upstream " + r.Host + ": " + msg
	if fo := (*formOverrideError)(nil); errors.As(err, &fo) {
		status, reason = http.StatusForbidden, fo.reason
	}
	if rs != nil && rs.aws != nil {
		if d := rs.aws.denied.Load(); d != nil {
			status, reason = http.StatusForbidden, d.reason
		}
	}
	if rs != nil && rs.scan != nil {
		if d := rs.scan.denied.Load(); d != nil {
			status, reason = http.StatusForbidden, d.reason
		}
	}
	if rs != nil {
		rs.upErr = reason
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the guest went away
	}
	writeRefusal(w, r, status, reason)
}

// countingWriter counts the body bytes sent to the guest and keeps the
// status; Unwrap lets ReverseProxy reach Flush and Hijack.
type countingWriter struct {
	http.ResponseWriter
	n      atomic.Int64
	status int
	// mask, when set, masks the headers of informational (1xx) responses,
	// which ReverseProxy passes on before ModifyResponse sees anything.
	mask *replacer
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 || c.status < 200 {
		c.status = code
	}
	if code < 200 && c.mask != nil {
		for _, vals := range c.Header() {
			for i, v := range vals {
				vals[i] = c.mask.replaceString(v)
			}
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }
