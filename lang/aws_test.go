package lang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbx-dev/sbx/policy"
)

// TestSecretAWS decodes a secret's aws block into the sandbox policy,
// with the default variables for the secret key and session token.
func TestSecretAWS(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"image.hcl": egressImage,
		"main.hcl": `egress "aws" {
  allow = ["bedrock-runtime.us-east-1.amazonaws.com"]
}
secret "aws" {
  env    = "AWS_ACCESS_KEY_ID"
  hosts  = ["bedrock-runtime.us-east-1.amazonaws.com"]
  source = "env:SBX_AWS_CREDS"
  aws {
    services = ["bedrock", "bedrock"]
    regions  = ["us-east-1"]
  }
}
sandbox "s" {
  image   = image.agent
  egress  = [egress.aws]
  secrets = [secret.aws]
}
`,
	})
	cfg := mustLoad(t, dir, Options{})
	got := cfg.Sandboxes["s"].Policy.Secrets
	if len(got) != 1 {
		t.Fatalf("secrets = %+v", got)
	}
	want := &policy.AWSCredential{Services: []string{"bedrock"}, Regions: []string{"us-east-1"},
		SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"}
	if diff := cmp.Diff(want, got[0].AWS); diff != "" {
		t.Errorf("AWS (-want +got):\n%s", diff)
	}
}
