package oauth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// jwtParts splits a compact JWS into header, claims and signature when
// its first two parts are base64url JSON objects.
func jwtParts(tok string) (header, claims, sig string, ok bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", "", "", false
	}
	for _, p := range parts[:2] {
		raw, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return "", "", "", false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", "", "", false
		}
	}
	return parts[0], parts[1], parts[2], true
}

// jwtPlaceholder returns tok with a random signature of the same length
// (at least 32 bytes), or false when tok is not a JWT.
func jwtPlaceholder(tok string) (string, bool, error) {
	h, c, sig, ok := jwtParts(tok)
	if !ok {
		return "", false, nil
	}
	n := max(base64.RawURLEncoding.DecodedLen(len(sig)), 32)
	for {
		r := make([]byte, n)
		if _, err := rand.Read(r); err != nil {
			return "", false, err
		}
		if s := base64.RawURLEncoding.EncodeToString(r); s != sig {
			return h + "." + c + "." + s, true, nil
		}
	}
}

// jwtExpiry returns the exp claim of a JWT.
func jwtExpiry(tok string) (time.Time, bool) {
	_, c, _, ok := jwtParts(tok)
	if !ok {
		return time.Time{}, false
	}
	raw, _ := base64.RawURLEncoding.DecodeString(c)
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}
