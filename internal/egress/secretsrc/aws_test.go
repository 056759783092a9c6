package secretsrc

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/sigv4"
)

// TestResolveAWS reads the multi-line JSON `aws configure
// export-credentials --format process` prints through an env: source
// and returns it on one line; a source that is no credential fails
// without quoting it.
func TestResolveAWS(t *testing.T) {
	creds := "{\n  \"Version\": 1,\n  \"AccessKeyId\": \"ASIAEXAMPLEEXAMPLE12\",\n  \"SecretAccessKey\": \"secretsecretsecretsecretsecretsecret0000\",\n  \"SessionToken\": \"tokentokentoken\",\n  \"Expiration\": \"2030-01-01T00:00:00+00:00\"\n}\n"
	v, err := resolve(t, "env:CREDS", Options{Environ: []string{"CREDS=" + creds}, AWS: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sigv4.ParseCredential(v)
	if err != nil || strings.Contains(string(v), "\n") {
		t.Fatalf("%q: %v", v, err)
	}
	if c.AccessKeyID != "ASIAEXAMPLEEXAMPLE12" || c.SecretAccessKey != "secretsecretsecretsecretsecretsecret0000" || c.SessionToken != "tokentokentoken" {
		t.Errorf("credential %+v", c)
	}
	// Without AWS the same text is refused: it spans lines.
	if _, err := resolve(t, "env:CREDS", Options{Environ: []string{"CREDS=" + creds}}); err == nil {
		t.Error("a multi-line value resolved without AWS")
	}
	_, err = resolve(t, "env:CREDS", Options{Environ: []string{"CREDS=sk-not-a-credential-value"}, AWS: true})
	if err == nil || strings.Contains(err.Error(), "sk-not-a-credential-value") {
		t.Errorf("a value that is no credential: %v", err)
	}
}
