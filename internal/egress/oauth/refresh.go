package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Upstream sends a refresh request body (of the given content type) to
// the login's token endpoint and returns the response, whose body it
// must not have compressed (the caller asks for an identity encoding).
type Upstream func(ctx context.Context, contentType string, body []byte) (*http.Response, error)

// MaxRequestBody and MaxResponseBody bound what a refresh reads.
const (
	MaxRequestBody  = 64 << 10
	MaxResponseBody = 1 << 20
)

// Reply is what the guest gets for its refresh request.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
	// Upstream reports whether the token endpoint was called.
	Upstream bool
	// Refused, when not empty, says why the refresh was refused (for
	// the audit log); Status is then 403.
	Refused string
	// WriteBack is the error of writing the new tokens to the host's
	// credential file, when that failed: the guest is still answered,
	// and the Login keeps the new tokens in memory.
	WriteBack error
}

// Refresh handles a refresh request the guest sent to the token
// endpoint: a body (JSON or a form) whose refresh field carries a
// refresh placeholder this Login minted. Under the file lock it reads
// the credential file again; when the tokens were rotated since that
// placeholder was minted, it answers with placeholders for the file's
// tokens without calling upstream. Otherwise it sends the body with the
// real refresh token through up, writes the response's tokens back to
// the file and answers the response with new placeholders. Any other
// refresh is refused with a 403 whose body says why. An error means no
// reply could be made (upstream unreachable, the file unreadable).
func (l *Login) Refresh(ctx context.Context, contentType string, body []byte, up Upstream) (*Reply, error) {
	if len(body) > MaxRequestBody {
		return refused("the refresh request body is larger than %d bytes", MaxRequestBody), nil
	}
	ph, replace, err := refreshField(contentType, body, l.spec.RefreshField)
	if err != nil {
		return refused("%v", err), nil
	}
	l.mu.Lock()
	stoodFor, known := l.refresh[ph]
	l.mu.Unlock()
	if !known {
		return refused("%v: sbx refreshes secret.%s only for the refresh placeholder it gave this sandbox", ErrUnknownPlaceholder, l.name), nil
	}
	if strings.Count(string(body), ph) != 1 {
		return refused("the refresh placeholder is in the request body outside field %s", l.spec.RefreshField), nil
	}

	unlock, err := l.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	l.mu.Lock()
	err = l.reloadLocked(true)
	cur := l.cur
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if cur.refresh != stoodFor {
		// Rotated since the guest's placeholder was minted: another
		// sandbox, RefreshIfDue or the user's CLI refreshed already.
		l.mu.Lock()
		g, err := l.mintLocked(cur)
		l.mu.Unlock()
		if err != nil {
			return nil, err
		}
		out := map[string]any{"access_token": g.access, "refresh_token": g.refresh, "token_type": "Bearer"}
		if g.id != "" {
			out["id_token"] = g.id
		}
		if scope, _, err := refreshField(contentType, body, "scope"); err == nil && scope != "" {
			// Granted as asked (RFC 6749 5.1 lets a server leave scope
			// out then; Claude Code reads no scope as none).
			out["scope"] = scope
		}
		if exp, ok := cur.expiry(); ok {
			// The client computes its expiry from expires_in (Claude
			// Code does, and refreshes again without it).
			out["expires_in"] = max(0, int64(exp.Sub(l.now()).Round(time.Second)/time.Second))
		}
		data, _ := json.Marshal(out)
		return jsonReply(http.StatusOK, data, false), nil
	}

	newBody, err := replace(cur.refresh)
	if err != nil {
		return nil, err
	}
	resp, err := up(ctx, contentType, newBody)
	if err != nil {
		return nil, fmt.Errorf("secret.%s: refreshing at %s: %w", l.name, l.spec.TokenURL, err)
	}
	data, err := readResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("secret.%s: refreshing at %s: %w", l.name, l.spec.TokenURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		// Pass the failure on, with any token it echoes masked.
		l.mu.Lock()
		masked := l.maskLocked(string(data))
		l.mu.Unlock()
		r := jsonReply(resp.StatusCode, []byte(masked), true)
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		return r, nil
	}
	fields, nt, err := l.parseTokenResponse(data, cur)
	if err != nil {
		return nil, err
	}
	werr := l.storeLocked(nt)
	l.mu.Lock()
	g, err := l.mintLocked(nt)
	if err == nil {
		for k, v := range map[string]string{"access_token": g.access, "refresh_token": g.refresh, "id_token": g.id} {
			if _, ok := fields[k]; ok {
				fields[k] = v
			}
		}
		for k, v := range fields {
			if s, ok := v.(string); ok && k != "access_token" && k != "refresh_token" && k != "id_token" {
				fields[k] = l.maskLocked(s)
			}
		}
	}
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("secret.%s: encoding the refresh response", l.name)
	}
	r := jsonReply(http.StatusOK, out, true)
	r.WriteBack = werr
	return r, nil
}

// RefreshIfDue refreshes the login from the host when its access token
// expires within SelfRefreshWindow (its exp claim when it is a JWT, else
// the credential file's expires_at), and reports whether it did. It
// sends a JSON body with grant_type, refresh_token, and the spec's
// client_id and scope when it names them.
// The guest's placeholders keep working: an access placeholder stands
// for the current access token, and a refresh from the guest after this
// one is answered from the file.
func (l *Login) RefreshIfDue(ctx context.Context, up Upstream) (bool, error) {
	due := func() (tokens, bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := l.reloadLocked(false); err != nil {
			return tokens{}, false, err
		}
		exp, ok := l.cur.expiry()
		return l.cur, ok && !l.now().Before(exp.Add(-SelfRefreshWindow)), nil
	}
	if _, ok, err := due(); err != nil || !ok {
		return false, err
	}
	unlock, err := l.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	cur, ok, err := due()
	if err != nil || !ok {
		return false, err
	}
	req := map[string]string{"grant_type": "refresh_token", "refresh_token": cur.refresh}
	if l.spec.ClientID != "" {
		req["client_id"] = l.spec.ClientID
	}
	if l.spec.Scope != "" {
		req["scope"] = l.spec.Scope
	}
	body, _ := json.Marshal(req)
	resp, err := up(ctx, "application/json", body)
	if err != nil {
		return false, fmt.Errorf("secret.%s: refreshing at %s: %w", l.name, l.spec.TokenURL, err)
	}
	data, err := readResponse(resp)
	if err != nil {
		return false, fmt.Errorf("secret.%s: refreshing at %s: %w", l.name, l.spec.TokenURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("secret.%s: the token endpoint %s answered %s", l.name, l.spec.TokenURL, resp.Status)
	}
	_, nt, err := l.parseTokenResponse(data, cur)
	if err != nil {
		return false, err
	}
	return true, l.storeLocked(nt)
}

// parseTokenResponse reads a token response's fields and the tokens it
// rotates (a token it leaves out stays as in cur).
func (l *Login) parseTokenResponse(data []byte, cur tokens) (map[string]any, tokens, error) {
	var fields map[string]any
	if json.Unmarshal(data, &fields) != nil || fields == nil {
		return nil, tokens{}, fmt.Errorf("secret.%s: the token endpoint's response is not a JSON object", l.name)
	}
	nt := cur
	for k, dst := range map[string]*string{"access_token": &nt.access, "refresh_token": &nt.refresh, "id_token": &nt.id} {
		v, ok := fields[k]
		if !ok || v == nil {
			if k == "access_token" {
				return nil, tokens{}, fmt.Errorf("secret.%s: the token endpoint's response has no access_token", l.name)
			}
			delete(fields, k)
			continue
		}
		s, ok := v.(string)
		if !ok || len(s) < minTokenLen {
			return nil, tokens{}, fmt.Errorf("secret.%s: the token endpoint's %s is not a token", l.name, k)
		}
		*dst = s
	}
	// The new access token's expiry: expires_in from now, else its exp
	// claim; unknown leaves the file's as it was.
	if v, ok := fields["expires_in"].(float64); ok && v > 0 && v < 1<<31 {
		nt.expires = l.now().Add(time.Duration(v) * time.Second)
	} else if exp, ok := jwtExpiry(nt.access); ok {
		nt.expires = exp
	}
	return fields, nt, nil
}

// storeLocked writes nt back to the credential file (the caller holds
// the file lock) and makes them the Login's current tokens, even when
// the write fails.
func (l *Login) storeLocked(nt tokens) error {
	l.mu.Lock()
	l.cur = nt
	l.mu.Unlock()
	d, _, err := l.readTokens()
	if err != nil {
		return err
	}
	if err := l.setTokens(d, nt); err != nil {
		return err
	}
	if l.spec.ExpiresAt != "" && !nt.expires.IsZero() {
		if err := d.set(l.spec.ExpiresAt, toUnix(nt.expires, l.spec.ExpiresAtUnit)); err != nil {
			return fmt.Errorf("secret.%s: credential file: %v", l.name, err)
		}
	}
	if l.spec.RefreshedAt != "" {
		if err := d.set(l.spec.RefreshedAt, l.now().UTC().Format(time.RFC3339Nano)); err != nil {
			return fmt.Errorf("secret.%s: credential file: %v", l.name, err)
		}
	}
	data, err := d.encode()
	if err != nil {
		return err
	}
	if err := l.writeFile(data); err != nil {
		return err
	}
	if fi, err := os.Stat(l.path); err == nil {
		l.mu.Lock()
		l.stamp = fi
		l.mu.Unlock()
	}
	return nil
}

// maskLocked replaces every real token (current, or stood for by a
// minted placeholder) in s by a placeholder.
func (l *Login) maskLocked(s string) string {
	for _, p := range [][2]string{{l.cur.access, l.guest.access}, {l.cur.refresh, l.guest.refresh}, {l.cur.id, l.guest.id}} {
		if p[0] != "" {
			s = strings.ReplaceAll(s, p[0], p[1])
		}
	}
	for ph, real := range l.refresh {
		s = strings.ReplaceAll(s, real, ph)
	}
	return s
}

func readResponse(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, fmt.Errorf("the response is %s-encoded", ce)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxResponseBody {
		return nil, fmt.Errorf("the response is larger than %d bytes", MaxResponseBody)
	}
	return data, nil
}

// refreshField returns the value of field in a JSON or form body and a
// function that returns the body with that value replaced.
func refreshField(contentType string, body []byte, field string) (string, func(string) ([]byte, error), error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", nil, errors.New("the refresh request has no content type; it must be JSON or a form")
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil || m == nil || dec.More() {
			return "", nil, errors.New("the refresh request body is not a JSON object")
		}
		v, ok := m[field].(string)
		if !ok {
			return "", nil, fmt.Errorf("the refresh request body has no string field %s", field)
		}
		return v, func(real string) ([]byte, error) {
			m[field] = real
			return json.Marshal(m)
		}, nil
	case mt == "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return "", nil, errors.New("the refresh request body is not a form")
		}
		if len(vals[field]) != 1 {
			return "", nil, fmt.Errorf("the refresh request form has no single field %s", field)
		}
		return vals.Get(field), func(real string) ([]byte, error) {
			vals.Set(field, real)
			return []byte(vals.Encode()), nil
		}, nil
	}
	return "", nil, fmt.Errorf("the refresh request body is %s; it must be JSON or a form", mt)
}

func refused(format string, args ...any) *Reply {
	msg := fmt.Sprintf(format, args...)
	body, _ := json.Marshal(map[string]string{"error": "access_denied", "error_description": "sbx refused this refresh: " + msg})
	r := jsonReply(http.StatusForbidden, body, false)
	r.Refused = msg
	return r
}

func jsonReply(status int, body []byte, upstream bool) *Reply {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	return &Reply{Status: status, Header: h, Body: body, Upstream: upstream}
}
