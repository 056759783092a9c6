package oauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/policy"
)

// tokens are a login's real tokens, as the credential file holds them,
// and the access token's expiry the file states (zero when the spec
// names no expires_at or the file has none).
type tokens struct {
	id, access, refresh string
	expires             time.Time
}

// expiry is when the access token expires: its exp claim when it is a
// JWT, else the file's expiry.
func (t tokens) expiry() (time.Time, bool) {
	if exp, ok := jwtExpiry(t.access); ok {
		return exp, true
	}
	return t.expires, !t.expires.IsZero()
}

// document is a credential file's JSON object.
type document map[string]any

func parseDocument(data []byte) (document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var d document
	if err := dec.Decode(&d); err != nil || d == nil {
		// The decoder's message can quote the file's bytes.
		return nil, errors.New("is not a JSON object")
	}
	return d, nil
}

// get returns the string at a dotted path; absent (or null) is "", false.
func (d document) get(path string) (string, bool, error) {
	var cur any = map[string]any(d)
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, fmt.Errorf("%s: %s is not inside an object", path, k)
		}
		if cur, ok = m[k]; !ok || cur == nil {
			return "", false, nil
		}
	}
	s, ok := cur.(string)
	if !ok {
		return "", false, fmt.Errorf("%s is not a string", path)
	}
	return s, true, nil
}

// number returns the number at a dotted path; absent (or null) is 0,
// false.
func (d document) number(path string) (float64, bool, error) {
	var cur any = map[string]any(d)
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, fmt.Errorf("%s: %s is not inside an object", path, k)
		}
		if cur, ok = m[k]; !ok || cur == nil {
			return 0, false, nil
		}
	}
	if n, ok := cur.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			return f, true, nil
		}
	}
	return 0, false, fmt.Errorf("%s is not a number", path)
}

// set puts v at a dotted path, making objects on the way.
func (d document) set(path string, v any) error {
	keys := strings.Split(path, ".")
	m := map[string]any(d)
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				return fmt.Errorf("%s: %s is not an object", path, k)
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
	return nil
}

func (d document) encode() ([]byte, error) {
	out, err := json.MarshalIndent(map[string]any(d), "", "  ")
	if err != nil {
		return nil, errors.New("cannot encode the credential file")
	}
	return append(out, '\n'), nil
}

// readTokens reads the credential file and the tokens the spec names.
func (l *Login) readTokens() (document, tokens, error) {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return nil, tokens{}, fmt.Errorf("secret.%s: reading its credential file: %w", l.name, err)
	}
	d, err := parseDocument(data)
	if err != nil {
		return nil, tokens{}, fmt.Errorf("secret.%s: credential file %s %v", l.name, l.path, err)
	}
	var t tokens
	for _, f := range []struct {
		path string
		dst  *string
		need bool
	}{{l.spec.AccessToken, &t.access, true}, {l.spec.RefreshToken, &t.refresh, true}, {l.spec.IDToken, &t.id, false}} {
		if f.path == "" {
			continue
		}
		v, ok, err := d.get(f.path)
		if err != nil {
			return nil, tokens{}, fmt.Errorf("secret.%s: credential file %s: %v", l.name, l.path, err)
		}
		if !ok && f.need {
			return nil, tokens{}, fmt.Errorf("secret.%s: credential file %s has no %s", l.name, l.path, f.path)
		}
		if ok && len(v) < minTokenLen {
			return nil, tokens{}, fmt.Errorf("secret.%s: credential file %s: %s is shorter than %d bytes", l.name, l.path, f.path, minTokenLen)
		}
		*f.dst = v
	}
	if l.spec.ExpiresAt != "" {
		n, ok, err := d.number(l.spec.ExpiresAt)
		if err != nil {
			return nil, tokens{}, fmt.Errorf("secret.%s: credential file %s: %v", l.name, l.path, err)
		}
		if ok {
			t.expires = fromUnix(n, l.spec.ExpiresAtUnit)
		}
	}
	return d, t, nil
}

// fromUnix and toUnix convert an expiry to and from its number in the
// credential file (seconds or milliseconds since the epoch).
func fromUnix(n float64, unit string) time.Time {
	if unit == policy.UnixMilliseconds {
		return time.UnixMilli(int64(n))
	}
	return time.Unix(int64(n), 0)
}

func toUnix(t time.Time, unit string) json.Number {
	if unit == policy.UnixMilliseconds {
		return json.Number(strconv.FormatInt(t.UnixMilli(), 10))
	}
	return json.Number(strconv.FormatInt(t.Unix(), 10))
}

// writeFile replaces the credential file with data atomically: a
// temporary file in the same directory, with the file's mode, synced,
// then renamed over it.
func (l *Login) writeFile(data []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(l.path); err == nil {
		mode = fi.Mode().Perm()
	}
	dir, base := filepath.Split(l.path)
	f, err := os.CreateTemp(dir, "."+base+".sbx-*")
	if err != nil {
		return fmt.Errorf("secret.%s: writing its credential file: %w", l.name, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("secret.%s: writing its credential file: %w", l.name, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("secret.%s: writing its credential file: %w", l.name, err)
	}
	return nil
}

// LockPath is the lock file of the credential file at path:
// ".NAME.sbx-lock" beside it.
func LockPath(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".sbx-lock")
}

// lock takes the login's file lock: an flock on LockPath(l.path),
// shared by every process brokering the same file (each sandbox's
// network, the user's other sandboxes), held across each
// read-modify-write of the file.
func (l *Login) lock() (unlock func(), err error) {
	f, err := openLockFile(LockPath(l.path))
	if err != nil {
		return nil, fmt.Errorf("secret.%s: locking its credential file: %w", l.name, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("secret.%s: locking its credential file: %w", l.name, err)
	}
	return func() { unlockFile(f); f.Close() }, nil
}
