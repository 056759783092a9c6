package oauth

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/egress/secretsrc"
	"github.com/sbx-dev/sbx/policy"
)

// minTokenLen is the shortest token a Login brokers: shorter ones cannot
// be masked reliably (egress has the same bound for a secret's value).
const minTokenLen = 8

// SelfRefreshWindow is how long before its access token expires a login
// is refreshed by RefreshIfDue.
const SelfRefreshWindow = 5 * time.Minute

// Options tune a Login.
type Options struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Login is one secret's OAuth login, brokered for one sandbox. Its
// methods are safe for concurrent use; several Logins (in one process
// or several) may share one credential file.
type Login struct {
	name string
	spec policy.OAuth
	path string
	now  func() time.Time

	mu    sync.Mutex
	cur   tokens
	stamp os.FileInfo
	// access holds the access placeholders minted; any of them stands
	// for the current access token.
	access map[string]bool
	// refresh maps each refresh placeholder minted to the real refresh
	// token it stood for when minted.
	refresh map[string]string
	// guest are the placeholders last minted.
	guest tokens
}

// Open opens the login of secret name (spec, its oauth block) whose
// credential file is path on the host. It reads the file once to check
// that it holds the tokens spec names.
func Open(name string, spec policy.OAuth, path string, opts Options) (*Login, error) {
	l := &Login{name: name, spec: spec, path: path, now: opts.Now,
		access: map[string]bool{}, refresh: map[string]string{}}
	if l.now == nil {
		l.now = time.Now
	}
	if spec.AccessToken == "" || spec.RefreshToken == "" || spec.TokenURL == "" {
		return nil, fmt.Errorf("secret.%s: its oauth block names no token endpoint, access token or refresh token", name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.reloadLocked(true); err != nil {
		return nil, err
	}
	return l, nil
}

// Name is the secret's name.
func (l *Login) Name() string { return l.name }

// Spec is the secret's oauth block.
func (l *Login) Spec() policy.OAuth { return l.spec }

// reloadLocked reads the file again when it changed since the last read
// (or always, when force is set).
func (l *Login) reloadLocked(force bool) error {
	fi, err := os.Stat(l.path)
	if err != nil {
		return fmt.Errorf("secret.%s: reading its credential file: %w", l.name, err)
	}
	if !force && l.stamp != nil && os.SameFile(fi, l.stamp) && fi.ModTime().Equal(l.stamp.ModTime()) && fi.Size() == l.stamp.Size() {
		return nil
	}
	_, t, err := l.readTokens()
	if err != nil {
		return err
	}
	l.cur, l.stamp = t, fi
	return nil
}

// mintLocked makes new placeholders for t and records them.
func (l *Login) mintLocked(t tokens) (tokens, error) {
	var g tokens
	var err error
	if g.access, err = l.placeholder(t.access, "access"); err != nil {
		return tokens{}, err
	}
	if g.refresh, err = l.placeholder(t.refresh, "refresh"); err != nil {
		return tokens{}, err
	}
	if t.id != "" {
		if g.id, err = l.placeholder(t.id, "id"); err != nil {
			return tokens{}, err
		}
	}
	l.access[g.access] = true
	l.refresh[g.refresh] = t.refresh
	l.guest = g
	return g, nil
}

// placeholder stands in for one token: a JWT with a random signature, or
// a secretsrc placeholder.
func (l *Login) placeholder(tok, kind string) (string, error) {
	if ph, ok, err := jwtPlaceholder(tok); err != nil || ok {
		return ph, err
	}
	return secretsrc.Placeholder(l.name + "_" + kind)
}

// Render returns the guest's copy of the credential file: the host's
// file with each token the spec names replaced by a new placeholder.
// Everything else in the file (account ids, the refresh time, the
// login mode) is kept as it is.
func (l *Login) Render() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, t, err := l.readTokens()
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(l.path); err == nil {
		l.cur, l.stamp = t, fi
	}
	g, err := l.mintLocked(t)
	if err != nil {
		return nil, err
	}
	if err := l.setTokens(d, g); err != nil {
		return nil, err
	}
	return d.encode()
}

func (l *Login) setTokens(d document, t tokens) error {
	for _, f := range []struct{ path, v string }{{l.spec.AccessToken, t.access}, {l.spec.RefreshToken, t.refresh}, {l.spec.IDToken, t.id}} {
		if f.path == "" || f.v == "" {
			continue
		}
		if err := d.set(f.path, f.v); err != nil {
			return fmt.Errorf("secret.%s: credential file: %v", l.name, err)
		}
	}
	return nil
}

// AccessToken returns the real access token for an access placeholder
// this Login minted: the one the credential file holds now, which may
// have been rotated since by another sandbox or the user's CLI.
func (l *Login) AccessToken(placeholder string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.access[placeholder] {
		return "", false
	}
	if err := l.reloadLocked(false); err != nil {
		// Keep the last token read: the file may be mid-edit by hand.
		return l.cur.access, l.cur.access != ""
	}
	return l.cur.access, true
}

// IsPlaceholder reports whether s is a placeholder this Login minted
// (for any of its tokens), or the real value of one of its current
// tokens: text the engine must not forward where a token does not go.
func (l *Login) IsPlaceholder(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, r := l.refresh[s]
	return l.access[s] || r || s == l.guest.id
}

// Masks returns (real, placeholder) pairs of the current tokens, to mask
// real values in what reaches the guest.
func (l *Login) Masks() [][2]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][2]string
	for _, p := range [][2]string{{l.cur.access, l.guest.access}, {l.cur.refresh, l.guest.refresh}, {l.cur.id, l.guest.id}} {
		if p[0] != "" && p[1] != "" {
			out = append(out, p)
		}
	}
	return out
}

// Placeholders returns every placeholder this Login minted so far.
func (l *Login) Placeholders() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for p := range l.access {
		out = append(out, p)
	}
	for p := range l.refresh {
		out = append(out, p)
	}
	if l.guest.id != "" {
		out = append(out, l.guest.id)
	}
	return out
}

// ErrUnknownPlaceholder is the error of a refresh whose refresh token is
// not a placeholder this Login minted.
var ErrUnknownPlaceholder = errors.New("the refresh token is not a placeholder this sandbox was given")
