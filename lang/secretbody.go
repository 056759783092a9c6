package lang

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

var secretBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "host", Required: true},
		{Name: "path", Required: true},
		{Name: "form_field"},
		{Name: "json_field"},
	},
}

var secretWebSocketSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "json_field"},
	},
}

// decodeSecretBodies decodes a secret's body blocks (each one place in
// request bodies its value goes) and its websocket block, after the
// secret's hosts, aws and oauth blocks are known.
func (l *loader) decodeSecretBodies(s *Secret, blocks hcl.Blocks) {
	var ws *hcl.Block
	seen := map[string]int{}
	for _, b := range blocks {
		switch b.Type {
		case "body":
			if f, ok := l.decodeSecretBody(s, b); ok {
				if line, dup := seen[f.Key()]; dup {
					l.errorf(b.DefRange, "Duplicate body field",
						"secret.%s already names %s at line %d.", s.Name, f.Key(), line)
					continue
				}
				seen[f.Key()] = b.DefRange.Start.Line
				s.Body = append(s.Body, f)
			}
		case "websocket":
			if ws != nil {
				l.errorf(b.DefRange, "Duplicate websocket block",
					"secret.%s already has a websocket block at line %d; a secret has at most one.", s.Name, ws.DefRange.Start.Line)
				continue
			}
			ws = b
			l.decodeSecretWebSocket(s, b)
		}
	}
	if s.AWS == nil && s.OAuth == nil {
		return
	}
	kind := "an AWS credential (re-signed, never substituted)"
	if s.OAuth != nil {
		kind = "an OAuth login (its placeholders change at each refresh)"
	}
	for _, b := range blocks {
		if b.Type == "body" || b.Type == "websocket" {
			l.errorf(b.DefRange, "Secret cannot be substituted in bodies",
				"secret.%s is %s: a %s block applies only to a secret whose value is substituted as it is; remove it, or declare another secret.", s.Name, kind, b.Type)
		}
	}
	s.Body, s.WebSocket = nil, nil
}

func (l *loader) decodeSecretBody(s *Secret, b *hcl.Block) (policy.BodyField, bool) {
	content, diags := b.Body.Content(secretBodySchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return policy.BodyField{}, false
	}
	f := policy.BodyField{Origin: l.origin("secret."+s.Name, b.DefRange)}
	ok := true
	if a := content.Attributes["host"]; a != nil {
		v, good := l.attrString(a)
		if good {
			if err := policy.CheckBodyHost(v, s.Hosts); err != nil {
				l.errorf(a.Expr.Range(), "Invalid body host", "secret.%s: %v.", s.Name, err)
				good = false
			}
			f.Host = strings.ToLower(strings.TrimSuffix(v, "."))
		}
		ok = ok && good
	}
	if a := content.Attributes["path"]; a != nil {
		v, good := l.attrString(a)
		if good {
			if err := policy.CheckBodyPath(v); err != nil {
				l.errorf(a.Expr.Range(), "Invalid body path", "%v.", err)
				good = false
			}
			f.Path = v
		}
		ok = ok && good
	}
	form, json := content.Attributes["form_field"], content.Attributes["json_field"]
	switch {
	case form == nil && json == nil:
		l.errorf(b.DefRange, "Body field not named",
			"secret.%s's body block names no field: set form_field (a field of an application/x-www-form-urlencoded body) or json_field (a dot-separated path to a string in a JSON body).", s.Name)
		return f, false
	case form != nil && json != nil:
		l.errorf(json.Range, "Body field named twice",
			"secret.%s's body block sets both form_field and json_field; a body is a form or JSON, so each block names one field (write two blocks for both).", s.Name)
		return f, false
	case form != nil:
		v, good := l.attrString(form)
		if good {
			if err := policy.CheckFormField(v); err != nil {
				l.errorf(form.Expr.Range(), "Invalid form field", "%v.", err)
				good = false
			}
			f.Form = v
		}
		ok = ok && good
	default:
		v, good := l.attrString(json)
		if good {
			if err := policy.CheckJSONPath(v); err != nil {
				l.errorf(json.Expr.Range(), "Invalid JSON field", "%v.", err)
				good = false
			}
			f.JSON = v
		}
		ok = ok && good
	}
	return f, ok
}

func (l *loader) decodeSecretWebSocket(s *Secret, b *hcl.Block) {
	content, diags := b.Body.Content(secretWebSocketSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	w := &policy.WebSocketField{Origin: l.origin("secret."+s.Name, b.DefRange)}
	if a := content.Attributes["json_field"]; a != nil {
		v, good := l.attrString(a)
		if !good {
			return
		}
		if err := policy.CheckJSONPath(v); err != nil {
			l.errorf(a.Expr.Range(), "Invalid JSON field", "%v.", err)
			return
		}
		w.JSON = v
	}
	s.WebSocket = w
}
