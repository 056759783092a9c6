package sandboxnet

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/policy"
)

// TestAWSPlaceholders resolves an AWS secret from the multi-line JSON a
// credential command prints and builds the network: the guest is told a
// placeholder key id, secret key and session token in the three
// variables, shaped as a temporary credential and holding no real part;
// an Update keeps them, and a secret that ceases to be an AWS credential
// gets an ordinary placeholder.
func TestAWSPlaceholders(t *testing.T) {
	s := specSecret("aws", "env:CREDS")
	s.Env = "AWS_ACCESS_KEY_ID"
	s.AWS = &policy.AWSCredential{Services: []string{"s3"}, Regions: []string{"us-east-1"},
		SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"}
	p := policy.Sandbox{Allow: []policy.AllowRule{{Pattern: policy.MustHostPattern("api.example.com")}}, Secrets: []policy.SecretBinding{s}}
	real := []string{"ASIAREALREALREAL1234", "realSecretrealSecretrealSecretrealSecret", "realTokenrealTokenrealToken"}
	creds := "{\n \"Version\": 1,\n \"AccessKeyId\": \"" + real[0] + "\",\n \"SecretAccessKey\": \"" + real[1] + "\",\n \"SessionToken\": \"" + real[2] + "\"\n}\n"
	values, err := ResolveSecrets(context.Background(), p, SecretSources{ConfigDir: t.TempDir(), Environ: []string{"CREDS=" + creds}})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{CA: auth, Policy: p, Secrets: values})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	env := strings.Join(n.Configure().Env, "\n") + "\n"
	if !regexp.MustCompile(`AWS_ACCESS_KEY_ID=ASIA[A-Z2-7]{16}\nAWS_SECRET_ACCESS_KEY=[A-Za-z0-9+/]{40}\nAWS_SESSION_TOKEN=IQoJ[A-Za-z0-9+/]{352}\n`).MatchString(env) {
		t.Fatalf("the guest's environment:\n%s", env)
	}
	for _, v := range real {
		if strings.Contains(env, v) {
			t.Errorf("the guest's environment holds a real part")
		}
	}
	if _, err := n.Update(p, values); err != nil {
		t.Fatal(err)
	}
	if again := strings.Join(n.Configure().Env, "\n") + "\n"; again != env {
		t.Errorf("an Update changed the placeholders")
	}
	plain := s
	plain.AWS = nil
	if _, err := n.Update(policy.Sandbox{Allow: p.Allow, Secrets: []policy.SecretBinding{plain}}, map[string][]byte{"aws": []byte("sk-plain-value-12345")}); err != nil {
		t.Fatal(err)
	}
	if got := n.Configure().Env; len(got) != 1 || !strings.HasPrefix(got[0], "AWS_ACCESS_KEY_ID=sbx_ph_aws_") {
		t.Errorf("after the secret ceased to be an AWS credential: %q", got)
	}
}
