package lang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbx-dev/sbx/policy"
)

const bodySecretSpec = `
image "agent" {
  base = "alpine:3.23"
}
egress "auth" {
  allow = ["auth.example.com", "api.example.com"]
}
secret "client" {
  env    = "CLIENT_SECRET"
  hosts  = ["auth.example.com", "api.example.com"]
  source = "env:CLIENT_SECRET"
  body {
    host       = "auth.example.com"
    path       = "/oauth/token"
    form_field = "client_secret"
  }
  body {
    host       = "api.example.com"
    path       = "/v1/login"
    json_field = "auth.key"
  }
  websocket {
    json_field = "token"
  }
}
sandbox "s" {
  image   = image.agent
  egress  = [egress.auth]
  secrets = [secret.client]
}
`

func TestSecretBodyAndWebSocket(t *testing.T) {
	cfg := mustLoad(t, writeDir(t, map[string]string{"main.hcl": bodySecretSpec}), Options{})
	s := cfg.Sandboxes["s"].Policy.Secrets[0]
	want := []policy.BodyField{
		{Host: "auth.example.com", Path: "/oauth/token", Form: "client_secret", Origin: policy.Origin{Block: "secret.client", File: "main.hcl", Line: 12}},
		{Host: "api.example.com", Path: "/v1/login", JSON: "auth.key", Origin: policy.Origin{Block: "secret.client", File: "main.hcl", Line: 17}},
	}
	if d := cmp.Diff(want, s.Body); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
	if d := cmp.Diff(&policy.WebSocketField{JSON: "token", Origin: policy.Origin{Block: "secret.client", File: "main.hcl", Line: 22}}, s.WebSocket); d != "" {
		t.Errorf("websocket (-want +got):\n%s", d)
	}
}

func TestSecretBodyInvalid(t *testing.T) {
	for _, c := range []struct {
		name, old, new, summary string
		line                    int
	}{
		{"host not a secret host", `host       = "auth.example.com"`, `host       = "other.example.com"`, "Invalid body host", 13},
		{"wildcard host", `host       = "auth.example.com"`, `host       = "*.example.com"`, "Invalid body host", 13},
		{"path pattern", `path       = "/oauth/token"`, `path       = "/oauth/*"`, "Invalid body path", 14},
		{"path escape", `path       = "/oauth/token"`, `path       = "/oauth/t%6fken"`, "Invalid body path", 14},
		{"path dotdot", `path       = "/oauth/token"`, `path       = "/a/../oauth/token"`, "Invalid body path", 14},
		{"relative path", `path       = "/oauth/token"`, `path       = "oauth/token"`, "Invalid body path", 14},
		{"form field", `form_field = "client_secret"`, `form_field = "client secret"`, "Invalid form field", 15},
		{"no field", `form_field = "client_secret"`, ``, "Body field not named", 12},
		{"two fields", `form_field = "client_secret"`, "form_field = \"client_secret\"\n    json_field = \"a\"", "Body field named twice", 16},
		{"json path", `json_field = "auth.key"`, `json_field = "auth..key"`, "Invalid JSON field", 20},
		{"ws json path", `json_field = "token"`, `json_field = ""`, "Invalid JSON field", 23},
		{"duplicate body", `    json_field = "auth.key"
  }`, `    json_field = "auth.key"
  }
  body {
    host       = "api.example.com"
    path       = "/v1/login"
    json_field = "auth.key"
  }`, "Duplicate body field", 22},
		{"duplicate websocket", `  websocket {`, "  websocket {}\n  websocket {", "Duplicate websocket block", 23},
		{"unknown attribute", `    json_field = "token"`, `    field = "token"`, "Unsupported argument", 23},
		{"aws secret", `  websocket {`, "  aws {\n    services = [\"s3\"]\n    regions = [\"us-east-1\"]\n  }\n  websocket {", "Secret cannot be substituted in bodies", 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := strings.Replace(bodySecretSpec, c.old, c.new, 1)
			if spec == bodySecretSpec {
				t.Fatal("the case changes nothing")
			}
			_, diags := Load(writeDir(t, map[string]string{"main.hcl": spec}), Options{})
			for _, d := range diags {
				if d.Summary == c.summary {
					if d.Subject == nil || d.Subject.Start.Line != c.line || d.Subject.Filename == "" {
						t.Fatalf("%s at %v, want line %d", c.summary, d.Subject, c.line)
					}
					return
				}
			}
			t.Fatalf("no %q: %v", c.summary, diags)
		})
	}
}
