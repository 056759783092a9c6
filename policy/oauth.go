package policy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// OAuth says a secret is an OAuth login whose tokens live in a JSON
// credential file on the host (the secret's source): the host keeps the
// access, refresh and id tokens and brokers the refresh. The guest's
// requests to the secret's hosts carry a placeholder for the access token
// as "Authorization: Bearer"; a POST to TokenURL whose JSON or form field
// RefreshField carries the refresh token's placeholder is sent with the
// real refresh token, and the new tokens in the response are written back
// to the source file and replaced by new placeholders before the guest
// sees them.
//
// The token paths are dot-separated keys into the credential file's JSON
// object ("tokens.access_token"). IDToken and RefreshedAt are optional.
//
// ExpiresAt, when set, is the path of the access token's expiry, a
// number of ExpiresAtUnit ("s" or "ms") since the Unix epoch, as Claude
// Code's "claudeAiOauth.expiresAt" in milliseconds: on a refresh the
// host writes there the expiry the token endpoint's expires_in gives,
// and it is the expiry the host refreshes by when the access token is
// not a JWT with an exp claim.
type OAuth struct {
	TokenURL     string `json:"token_url"`
	RefreshField string `json:"refresh_field"`
	ClientID     string `json:"client_id,omitempty"`
	IDToken      string `json:"id_token,omitempty"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	RefreshedAt  string `json:"refreshed_at,omitempty"`
	// ExpiresAt and ExpiresAtUnit came later, left out of hashes when
	// unset.
	ExpiresAt     string `json:"expires_at,omitempty"`
	ExpiresAtUnit string `json:"expires_at_unit,omitempty"`
	// Scope, when set, is the scope the host asks for when it refreshes
	// the login by itself (space-separated RFC 6749 scope tokens); left
	// out of hashes when unset.
	Scope string `json:"scope,omitempty"`
}

// CheckScope reports whether s is an OAuth scope (RFC 6749 3.3): scope
// tokens of printable ASCII other than '"' and '\\', separated by
// single spaces.
func CheckScope(s string) error {
	if s == "" {
		return errors.New("the scope is empty")
	}
	for _, tok := range strings.Split(s, " ") {
		if tok == "" {
			return errors.New("scope tokens are separated by single spaces")
		}
		for _, c := range tok {
			if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return fmt.Errorf("scope token %q has a character RFC 6749 does not allow", tok)
			}
		}
	}
	return nil
}

// Expiry units of OAuth.ExpiresAtUnit.
const (
	UnixSeconds      = "s"
	UnixMilliseconds = "ms"
)

// TokenHost returns the host of TokenURL, lower case, without a port.
func (o OAuth) TokenHost() string {
	u, err := url.Parse(o.TokenURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// CheckTokenURL checks an OAuth token endpoint: an https URL with a host,
// no user, query or fragment.
func CheckTokenURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "https":
		return fmt.Errorf("%q: a token endpoint is reached over https only (the refresh token never crosses the network in the clear)", s)
	case u.Hostname() == "":
		return fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return fmt.Errorf("%q carries a user; a token endpoint URL holds no credential", s)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("%q has a query or fragment; name the endpoint's path only", s)
	}
	if _, err := ParseHostPattern(u.Hostname()); err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	return nil
}

// CheckJSONPath checks a dot-separated path of JSON object keys.
func CheckJSONPath(s string) error {
	if s == "" {
		return fmt.Errorf("the path is empty")
	}
	for _, k := range strings.Split(s, ".") {
		if k == "" {
			return fmt.Errorf("%q has an empty key; write keys separated by single dots (tokens.access_token)", s)
		}
		for _, c := range k {
			if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return fmt.Errorf("%q: key %q may hold letters, digits, _ and - only", s, k)
			}
		}
	}
	return nil
}

// SecretFile delivers a secret's credential file into the guest, rendered
// from the host's file with every token replaced by a placeholder. The
// agent writes it at Path, owned by Owner, with Mode (which gives group
// and others nothing).
type SecretFile struct {
	Path  string `json:"path"`
	Mode  uint32 `json:"mode"`
	Owner string `json:"owner"`
}
