package sigv4

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// envCredentialJSON reads the lines `aws configure export-credentials
// --format env` (or env-no-export) prints — AWS_ACCESS_KEY_ID=…,
// AWS_SECRET_ACCESS_KEY=…, AWS_SESSION_TOKEN=… and
// AWS_CREDENTIAL_EXPIRATION=…, each optionally after "export " and with
// the value optionally quoted; blank lines and # comments are skipped —
// and returns the credential as the JSON ParseCredential reads.
func envCredentialJSON(b []byte) ([]byte, error) {
	var v struct {
		Version         int
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string
		SessionToken    string `json:",omitempty"`
	}
	v.Version = 1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, errors.New("an AWS credential must be the JSON or the NAME=VALUE lines `aws configure export-credentials` prints; a line is neither")
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		switch strings.TrimSpace(name) {
		case "AWS_ACCESS_KEY_ID":
			v.AccessKeyID = val
		case "AWS_SECRET_ACCESS_KEY":
			v.SecretAccessKey = val
		case "AWS_SESSION_TOKEN":
			v.SessionToken = val
		}
	}
	return json.Marshal(v)
}
