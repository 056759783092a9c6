package sandboxnet

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

func TestCheckEnv(t *testing.T) {
	p := policy.Sandbox{Secrets: []policy.SecretBinding{{Name: "token", Env: "TOKEN"}}}
	if err := CheckEnv(p, []string{"A=1", "TOKENS=2", "B"}); err != nil {
		t.Errorf("unrelated variables: %v", err)
	}
	err := CheckEnv(p, []string{"A=1", "TOKEN=mine"})
	if err == nil || !strings.Contains(err.Error(), "secret.token") {
		t.Errorf("TOKEN=mine: %v; want it refused naming secret.token", err)
	}
	if err := CheckEnv(p, []string{"TOKEN"}); err == nil {
		t.Error("TOKEN without a value was let through")
	}
}
