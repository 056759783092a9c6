package sigv4

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ParseCredential reads a credential as `aws configure export-credentials
// --format process` prints it (the credential_process format):
// {"Version":1,"AccessKeyId":…,"SecretAccessKey":…,"SessionToken":…,
// "Expiration":…}; SessionToken and Expiration are optional, Version
// must be 1 when present. Text that is not JSON is read as the lines
// `--format env` prints (envCredentialJSON). Errors never quote the input.
func ParseCredential(b []byte) (Credential, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] != '{' {
		j, err := envCredentialJSON(t)
		if err != nil {
			return Credential{}, err
		}
		b = j
	}
	var v struct {
		Version         *int
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string
		SessionToken    string
		Expiration      string
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&v); err != nil {
		return Credential{}, errors.New("an AWS credential must be the JSON `aws configure export-credentials --format process` prints; this does not parse as JSON")
	}
	if d.More() {
		return Credential{}, errors.New("an AWS credential must be one JSON object")
	}
	switch {
	case v.Version != nil && *v.Version != 1:
		return Credential{}, fmt.Errorf("AWS credential Version %d (want 1)", *v.Version)
	case !validKeyID(v.AccessKeyID):
		return Credential{}, errors.New("the AWS credential's AccessKeyId is missing or not 16 to 128 letters and digits")
	case len(v.SecretAccessKey) < 16 || strings.ContainsAny(v.SecretAccessKey, "\x00\r\n"):
		return Credential{}, errors.New("the AWS credential's SecretAccessKey is missing or malformed")
	case strings.ContainsAny(v.SessionToken, "\x00\r\n"):
		return Credential{}, errors.New("the AWS credential's SessionToken is malformed")
	}
	return Credential{AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken}, nil
}

// Compact renders c on one line in the format ParseCredential reads.
func (c Credential) Compact() []byte {
	b, _ := json.Marshal(struct {
		Version         int
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string
		SessionToken    string `json:",omitempty"`
	}{1, c.AccessKeyID, c.SecretAccessKey, c.SessionToken})
	return b
}

func validKeyID(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

const (
	upperAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" // 32 symbols, 5 bits each
	alnum      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)

// Placeholder returns a fresh random temporary credential shaped like a
// real one, so that SDKs accept it: an "ASIA" key id with 16 upper-case
// letters and digits (80 random bits), a 40-character secret (240 bits)
// and a 356-character session token.
func Placeholder() (Credential, error) {
	id, err := randomFrom(upperAlnum, 16)
	if err != nil {
		return Credential{}, err
	}
	secret, err := randomFrom(alnum, 40)
	if err != nil {
		return Credential{}, err
	}
	token, err := randomFrom(alnum, 352)
	if err != nil {
		return Credential{}, err
	}
	return Credential{AccessKeyID: "ASIA" + id, SecretAccessKey: secret, SessionToken: "IQoJ" + token}, nil
}

// randomFrom returns n symbols of set (of 32 or 64) chosen at random.
func randomFrom(set string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = set[int(b[i])%len(set)]
	}
	return string(b), nil
}

// PlaceholderString joins a placeholder credential into the one string
// a sandbox keeps for the secret; ParsePlaceholder splits it.
func PlaceholderString(c Credential) string {
	return c.AccessKeyID + " " + c.SecretAccessKey + " " + c.SessionToken
}

// ParsePlaceholder splits what PlaceholderString joined.
func ParsePlaceholder(s string) (Credential, error) {
	f := strings.Split(s, " ")
	if len(f) != 3 || !validKeyID(f[0]) || len(f[1]) < 16 || f[2] == "" {
		return Credential{}, errors.New("not an AWS placeholder credential")
	}
	return Credential{AccessKeyID: f[0], SecretAccessKey: f[1], SessionToken: f[2]}, nil
}
