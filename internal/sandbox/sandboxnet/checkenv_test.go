package sandboxnet

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/egress/secretsrc"
	"github.com/sbx-dev/sbx/internal/hostenv"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
	"github.com/sbx-dev/sbx/policy"
)

func TestCheckEnv(t *testing.T) {
	p := policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "token", Env: "TOKEN"}}}
	if err := CheckEnv(p, []string{"A=1", "TOKENS=2", "B"}); err != nil {
		t.Errorf("unrelated variables: %v", err)
	}
	err := CheckEnv(p, []string{"A=1", "TOKEN=mine"})
	if err == nil || !strings.Contains(err.Error(), "TOKEN is reserved for the placeholder of secret.token") {
		t.Errorf("TOKEN=mine: %v; want it refused as the name of secret.token's placeholder", err)
	}
	if err := CheckEnv(p, []string{"TOKEN"}); err == nil {
		t.Error("TOKEN without a value was let through")
	}
}

// TestCheckEnvPlaceholderValue: a value that holds a placeholder of one
// of the sandbox's secrets is refused, under any name and with any text
// around it, with a message that says it is the value (never showing
// it); the placeholders of secrets the sandbox does not have, and text
// that only looks like the start of one, pass.
func TestCheckEnvPlaceholderValue(t *testing.T) {
	p := policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "api_key", Env: "FIXTURE_API_KEY"}}}
	ph, err := secretsrc.Placeholder("api_key")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"X=" + ph, "AUTH=Bearer " + ph, "X=a" + ph + "b"} {
		err := CheckEnv(p, []string{"OK=1", kv})
		if err == nil {
			t.Errorf("%q was let through", kv)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "value of "+hostenv.Name(kv)+" holds a placeholder of secret.api_key") || strings.Contains(msg, ph) {
			t.Errorf("%q: %v; want the value named as holding secret.api_key's placeholder, and not shown", kv, err)
		}
	}
	other, _ := secretsrc.Placeholder("other")
	for _, kv := range []string{"X=" + other, "X=sbx_ph_api_key_", "X=" + ph[:len(ph)-1], "X"} {
		if err := CheckEnv(p, []string{kv}); err != nil {
			t.Errorf("%q: %v", kv, err)
		}
	}
}

// TestCheckEnvForbidden plays a caller of exec, run or the Go API that
// passes names the spec forbids: each is refused, with the pattern and
// where it is declared named and the value never shown.
func TestCheckEnvForbidden(t *testing.T) {
	origin := policy.Origin{Block: "sandbox.eval", File: "main.hcl", Line: 12}
	p := policy.Sandbox{
		Secrets:         []policy.SecretBinding{{Name: "claude", Env: "CLAUDE_CODE_OAUTH_TOKEN"}},
		ForbidEnv:       []string{"AWS_*", "MOLTNET_*", "*_PRIVATE_KEY"},
		ForbidEnvOrigin: origin,
	}
	for _, c := range []struct {
		env     []string
		pattern string
	}{
		{[]string{"MOLTNET_AGENT_TOKEN=s3cr3t-value"}, "MOLTNET_*"},
		{[]string{"A=1", "AWS_SECRET_ACCESS_KEY=s3cr3t-value"}, "AWS_*"},
		{[]string{"MOLTNET_"}, "MOLTNET_*"},
		{[]string{"SSH_PRIVATE_KEY=s3cr3t-value"}, "*_PRIVATE_KEY"},
		// An entry with an empty value, or "=" in the value, is the same name.
		{[]string{"AWS_REGION="}, "AWS_*"},
		{[]string{"MOLTNET_X=a=b"}, "MOLTNET_*"},
	} {
		err := CheckEnv(p, c.env)
		if err == nil {
			t.Errorf("%q was let through", c.env)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+c.pattern+`"`) || !strings.Contains(msg, "sandbox.eval, main.hcl:12") {
			t.Errorf("%q: %v; want the pattern %q and its origin named", c.env, err, c.pattern)
		}
		if strings.Contains(msg, "s3cr3t") {
			t.Errorf("%q: the error shows the value: %v", c.env, err)
		}
	}
	for _, env := range [][]string{
		{"MOLTNET=1", "XMOLTNET_A=1", "moltnet_token=1", "AWS=1", "PRIVATE_KEY=1"},
		nil,
	} {
		if err := CheckEnv(p, env); err != nil {
			t.Errorf("%q: %v", env, err)
		}
	}
	// Without forbid_env nothing but the placeholders is refused.
	if err := CheckEnv(policy.Sandbox{}, []string{"MOLTNET_TOKEN=1", "AWS_X=2"}); err != nil {
		t.Errorf("no patterns: %v", err)
	}
}

// TestGuestAddressesMatchTheImage: what the guest is configured with is
// what the image describes in /etc/sbx/image.json and resolv.conf.
func TestGuestAddressesMatchTheImage(t *testing.T) {
	auth, err := ca.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{CA: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	got := n.Configure().Net
	want := imageinfo.DefaultNetwork()
	if got.Addr != want.Address || got.Gateway != want.Gateway || len(want.DNS) != 1 || got.DNS != want.DNS[0] || got.MTU != want.MTU {
		t.Errorf("the guest is configured with %+v; the image says %+v", got, want)
	}
}

// TestCheckEnvDuplicates: the guest keeps the last entry of a name
// (hostenv.Merge), and a bare name counts as one; CheckEnv refuses a
// forbidden or placeholder name wherever it is in the list, first or
// last, with a value or bare, so no order of entries slips one past.
func TestCheckEnvDuplicates(t *testing.T) {
	p := policy.Sandbox{
		Secrets:   []policy.SecretBinding{{Name: "token", Env: "TOKEN"}},
		ForbidEnv: []string{"AWS_*"},
	}
	for _, env := range [][]string{
		{"AWS_KEY=s3cr3t", "AWS_KEY"},
		{"AWS_KEY", "OK=1"},
		{"OK=1", "OK=2", "AWS_KEY="},
		{"TOKEN=mine", "OK=1", "TOKEN"},
		{"OK", "TOKEN"},
		{"TOKEN", "TOKEN=mine"},
	} {
		if err := CheckEnv(p, env); err == nil {
			t.Errorf("%q was let through", env)
		}
	}
	if err := CheckEnv(p, []string{"OK=1", "OK", "OK=2", "TOKENX=1", "XAWS_KEY=1"}); err != nil {
		t.Errorf("duplicates of allowed names: %v", err)
	}
}

// TestCheckEnvAWS: the variables of an AWS credential's secret key and
// session token placeholders are reserved as its key id's is.
func TestCheckEnvAWS(t *testing.T) {
	p := policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "aws", Env: "AWS_ACCESS_KEY_ID",
		AWS: &policy.AWSCredential{SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"}}}}
	for _, kv := range []string{"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x", "AWS_SESSION_TOKEN=x"} {
		if err := CheckEnv(p, []string{kv}); err == nil || !strings.Contains(err.Error(), "secret.aws") {
			t.Errorf("%s: %v; want it refused as a placeholder variable of secret.aws", kv, err)
		}
	}
	if err := CheckEnv(p, []string{"AWS_REGION=us-east-1"}); err != nil {
		t.Errorf("AWS_REGION: %v", err)
	}
}
