package plan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/policy"
)

// TestSecretBodyWidens checks that a body field and WebSocket
// substitution added to a secret show as two widening changes, in the
// text plan and in its JSON, and that removing them narrows.
func TestSecretBodyWidens(t *testing.T) {
	bound := func(edit func(b *policy.SecretBinding)) func(s *state.SandboxAttrs) {
		return func(s *state.SandboxAttrs) {
			b := policy.SecretBinding{Name: "client", Env: "CLIENT_SECRET", Source: "env:CLIENT_SECRET",
				Hosts: []policy.HostPattern{policy.MustHostPattern("auth.example.com")}, Origin: policy.Origin{Block: "secret.client", File: "main.hcl", Line: 30}}
			if edit != nil {
				edit(&b)
			}
			s.Policy.Secrets = []policy.SecretBinding{b}
			s.PolicyHash = policy.Hash(s.Policy)
		}
	}
	withBody := bound(func(b *policy.SecretBinding) {
		b.Body = []policy.BodyField{{Host: "auth.example.com", Path: "/oauth/token", Form: "client_secret", Origin: policy.Origin{Block: "secret.client", File: "main.hcl", Line: 34}}}
		b.WebSocket = &policy.WebSocketField{JSON: "auth.token", Origin: policy.Origin{Block: "secret.client", File: "main.hcl", Line: 39}}
	})
	p := plan.Compute([]*state.Resource{sandbox("eval", withBody)}, []*state.Resource{sandbox("eval", bound(nil))})
	if s := p.Summary(); s.Widen != 2 {
		t.Errorf("summary %+v, want 2 widening", s)
	}
	var buf bytes.Buffer
	if err := plan.Render(&buf, p, plan.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"secret client is also substituted in the body of requests to auth.example.com/oauth/token form field client_secret",
		"secret client is also substituted in WebSocket messages to its hosts: JSON field auth.token of a text message",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, buf.String())
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	jb := bytes.NewBuffer(data)
	for _, want := range []string{`"kind":"secret.body"`, `"kind":"secret.websocket"`, `"line":34`, `"line":39`} {
		if !strings.Contains(strings.ReplaceAll(jb.String(), " ", ""), want) {
			t.Errorf("plan JSON lacks %s:\n%s", want, jb.String())
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(jb.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	back := plan.Compute([]*state.Resource{sandbox("eval", bound(nil))}, []*state.Resource{sandbox("eval", withBody)})
	if s := back.Summary(); s.Widen != 0 || s.Narrow != 2 {
		t.Errorf("removing: summary %+v, want 2 narrowing", s)
	}
}
