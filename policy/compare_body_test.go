package policy_test

import (
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

func bodySecret(body []policy.BodyField, ws *policy.WebSocketField) policy.SecretBinding {
	s := secret("client", "CLIENT_SECRET", "env:CLIENT_SECRET", "auth.example.com")
	s.Body, s.WebSocket = body, ws
	return s
}

// TestCompareSecretBody checks that a body field or WebSocket
// substitution widens when added (or moved) and narrows when removed,
// and that the policy hash sees each.
func TestCompareSecretBody(t *testing.T) {
	form := policy.BodyField{Host: "auth.example.com", Path: "/oauth/token", Form: "client_secret"}
	jsonf := policy.BodyField{Host: "auth.example.com", Path: "/oauth/token", JSON: "client_secret"}
	other := policy.BodyField{Host: "auth.example.com", Path: "/v2/token", Form: "client_secret"}
	type want struct {
		kind string
		dir  policy.Direction
	}
	cases := []struct {
		name     string
		old, new policy.SecretBinding
		want     []want
	}{
		{"body added", bodySecret(nil, nil), bodySecret([]policy.BodyField{form}, nil), []want{{"secret.body", policy.Widen}}},
		{"body removed", bodySecret([]policy.BodyField{form}, nil), bodySecret(nil, nil), []want{{"secret.body", policy.Narrow}}},
		{"form to json", bodySecret([]policy.BodyField{form}, nil), bodySecret([]policy.BodyField{jsonf}, nil),
			[]want{{"secret.body", policy.Widen}, {"secret.body", policy.Narrow}}},
		{"path moved", bodySecret([]policy.BodyField{form}, nil), bodySecret([]policy.BodyField{other}, nil),
			[]want{{"secret.body", policy.Widen}, {"secret.body", policy.Narrow}}},
		{"websocket on", bodySecret(nil, nil), bodySecret(nil, &policy.WebSocketField{}), []want{{"secret.websocket", policy.Widen}}},
		{"websocket off", bodySecret(nil, &policy.WebSocketField{JSON: "t"}), bodySecret(nil, nil), []want{{"secret.websocket", policy.Narrow}}},
		{"websocket field", bodySecret(nil, &policy.WebSocketField{}), bodySecret(nil, &policy.WebSocketField{JSON: "t"}), []want{{"secret.websocket", policy.Widen}}},
		{"same", bodySecret([]policy.BodyField{form}, &policy.WebSocketField{}), bodySecret([]policy.BodyField{form}, &policy.WebSocketField{}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, new := policy.Sandbox{Secrets: []policy.SecretBinding{c.old}}, policy.Sandbox{Secrets: []policy.SecretBinding{c.new}}
			var got []want
			for _, ch := range policy.Compare(old, new) {
				got = append(got, want{ch.Kind, ch.Direction})
			}
			if len(got) != len(c.want) {
				t.Fatalf("changes = %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("changes = %v, want %v", got, c.want)
				}
			}
			if (policy.Hash(old) == policy.Hash(new)) != (c.want == nil) {
				t.Errorf("hash equal = %v with changes %v", policy.Hash(old) == policy.Hash(new), got)
			}
		})
	}
}
