package sigv4_test

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/sigv4"
)

// TestParseCredentialEnv reads the credential as `aws configure
// export-credentials --format env` and env-no-export print it, and
// refuses text that is neither, without quoting it.
func TestParseCredentialEnv(t *testing.T) {
	want := sigv4.Credential{AccessKeyID: exampleKeyID, SecretAccessKey: exampleSecret, SessionToken: "tokentokentoken"}
	for name, text := range map[string]string{
		"env":           "export AWS_ACCESS_KEY_ID=" + exampleKeyID + "\nexport AWS_SECRET_ACCESS_KEY=" + exampleSecret + "\nexport AWS_SESSION_TOKEN=tokentokentoken\nexport AWS_CREDENTIAL_EXPIRATION=2030-01-01T00:00:00Z\n",
		"env-no-export": "AWS_ACCESS_KEY_ID=" + exampleKeyID + "\nAWS_SECRET_ACCESS_KEY='" + exampleSecret + "'\n# comment\n\nAWS_SESSION_TOKEN=\"tokentokentoken\"\n",
		"json":          `{"Version":1,"AccessKeyId":"` + exampleKeyID + `","SecretAccessKey":"` + exampleSecret + `","SessionToken":"tokentokentoken"}`,
	} {
		got, err := sigv4.ParseCredential([]byte(text))
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	for name, text := range map[string]string{
		"no secret":  "AWS_ACCESS_KEY_ID=" + exampleKeyID + "\n",
		"not a line": "AWS_ACCESS_KEY_ID " + exampleSecret + "\n",
	} {
		_, err := sigv4.ParseCredential([]byte(text))
		if err == nil || strings.Contains(err.Error(), exampleSecret) {
			t.Errorf("%s: err = %v, want an error that does not quote the text", name, err)
		}
	}
}
