package lang

import (
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

var secretOAuthSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "token_url", Required: true},
		{Name: "refresh_field"},
		{Name: "client_id"},
		{Name: "scope"},
		{Name: "id_token"},
		{Name: "access_token", Required: true},
		{Name: "refresh_token", Required: true},
		{Name: "refreshed_at"},
		{Name: "expires_at"},
		{Name: "expires_at_unit"},
	},
}

var secretFileSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "path", Required: true},
		{Name: "mode"},
		{Name: "owner"},
	},
}

// decodeSecretBlocks decodes a secret's oauth and file blocks.
func (l *loader) decodeSecretBlocks(s *Secret, blocks hcl.Blocks) {
	var oauthBlock, fileBlock, awsBlock *hcl.Block
	for _, b := range blocks {
		if b.Type == "aws" {
			awsBlock = b // decodeSecretAWS's
			continue
		}
		if b.Type == "body" || b.Type == "websocket" {
			continue // decodeSecretBodies'
		}
		prev := &oauthBlock
		if b.Type == "file" {
			prev = &fileBlock
		}
		if *prev != nil {
			l.errorf(b.DefRange, "Duplicate "+b.Type+" block",
				"secret.%s already has a %s block at line %d; a secret has at most one.", s.Name, b.Type, (*prev).DefRange.Start.Line)
			continue
		}
		*prev = b
	}
	if oauthBlock != nil && awsBlock != nil {
		l.errorf(oauthBlock.DefRange, "Secret is both an OAuth login and an AWS credential",
			"secret.%s has an aws block at line %d and an oauth block: an AWS credential is re-signed, an OAuth login is brokered; declare two secrets.", s.Name, awsBlock.DefRange.Start.Line)
		return
	}
	if oauthBlock != nil {
		l.decodeSecretOAuth(s, oauthBlock)
	}
	if fileBlock != nil {
		l.decodeSecretFile(s, fileBlock)
		if oauthBlock == nil {
			l.errorf(fileBlock.DefRange, "Secret file without oauth",
				"secret.%s delivers a credential file, but only an oauth block says which of its fields are tokens to replace by placeholders; add one.", s.Name)
		}
	}
	if oauthBlock != nil && s.Source != "" && !strings.HasPrefix(s.Source, "file:") {
		l.errorf(oauthBlock.DefRange, "OAuth secret needs a file source",
			"secret.%s is an OAuth login: the host reads its tokens from a JSON credential file and writes refreshed ones back to it, so its source must be file:PATH (or left to the bindings file), not %s.",
			s.Name, policy.SourceLabel(s.Source))
	}
}

func (l *loader) decodeSecretOAuth(s *Secret, b *hcl.Block) {
	content, diags := b.Body.Content(secretOAuthSchema)
	l.diags = append(l.diags, diags...)
	o := &policy.OAuth{RefreshField: "refresh_token"}
	ok := true
	if a := content.Attributes["token_url"]; a != nil {
		if v, good := l.attrString(a); good {
			if err := policy.CheckTokenURL(v); err != nil {
				l.errorf(a.Expr.Range(), "Invalid token URL", "%v.", err)
				ok = false
			} else {
				o.TokenURL = v
			}
		} else {
			ok = false
		}
	} else {
		ok = false
	}
	if a := content.Attributes["refresh_field"]; a != nil {
		if v, good := l.attrString(a); good {
			if v == "" || strings.ContainsAny(v, " \t\r\n=&\"") {
				l.errorf(a.Expr.Range(), "Invalid refresh field", "%q is not a JSON or form field name.", v)
				ok = false
			} else {
				o.RefreshField = v
			}
		}
	}
	if a := content.Attributes["client_id"]; a != nil {
		if v, good := l.attrString(a); good {
			o.ClientID = v
		}
	}
	if a := content.Attributes["scope"]; a != nil {
		if v, good := l.attrString(a); good {
			if err := policy.CheckScope(v); err != nil {
				l.errorf(a.Expr.Range(), "Invalid scope", "%v.", err)
				ok = false
			} else {
				o.Scope = v
			}
		} else {
			ok = false
		}
	}
	paths := map[string]string{}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"id_token", &o.IDToken}, {"access_token", &o.AccessToken},
		{"refresh_token", &o.RefreshToken}, {"refreshed_at", &o.RefreshedAt},
		{"expires_at", &o.ExpiresAt},
	} {
		a := content.Attributes[f.name]
		if a == nil {
			continue
		}
		v, good := l.attrString(a)
		if !good {
			ok = false
			continue
		}
		if err := policy.CheckJSONPath(v); err != nil {
			l.errorf(a.Expr.Range(), "Invalid credential file path", "%s: %v.", f.name, err)
			ok = false
			continue
		}
		if other, dup := paths[v]; dup {
			l.errorf(a.Expr.Range(), "Credential field named twice", "%s and %s both name %q; each token has its own field.", other, f.name, v)
			ok = false
			continue
		}
		paths[v] = f.name
		*f.dst = v
	}
	unit := content.Attributes["expires_at_unit"]
	if unit != nil {
		if v, good := l.attrString(unit); !good {
			ok = false
		} else if v != policy.UnixSeconds && v != policy.UnixMilliseconds {
			l.errorf(unit.Expr.Range(), "Invalid expiry unit",
				"%q: expires_at_unit is \"s\" (seconds since the Unix epoch) or \"ms\" (milliseconds, as Claude Code's expiresAt).", v)
			ok = false
		} else {
			o.ExpiresAtUnit = v
		}
	}
	switch at := content.Attributes["expires_at"]; {
	case at != nil && unit == nil:
		l.errorf(at.Expr.Range(), "Expiry without its unit",
			"secret.%s names the access token's expiry in its credential file; add expires_at_unit = \"s\" or \"ms\" to say what the number counts: a wrong guess makes the client refresh at every start or never.", s.Name)
		ok = false
	case at == nil && unit != nil:
		l.errorf(unit.Expr.Range(), "Expiry unit without expires_at",
			"secret.%s gives an expiry unit but no expires_at path for it.", s.Name)
		ok = false
	}
	if ok && o.AccessToken != "" && o.RefreshToken != "" {
		s.OAuth = o
	}
}

func (l *loader) decodeSecretFile(s *Secret, b *hcl.Block) {
	content, diags := b.Body.Content(secretFileSchema)
	l.diags = append(l.diags, diags...)
	f := &policy.SecretFile{Mode: 0o600, Owner: "root"}
	ok := true
	if a := content.Attributes["path"]; a != nil {
		if v, good := l.attrString(a); good {
			if !path.IsAbs(v) || path.Clean(v) != v || v == "/" {
				l.errorf(a.Expr.Range(), "Invalid credential file path", "%q must be an absolute, clean guest path of a file, as in \"/home/agent/.codex/auth.json\".", v)
				ok = false
			} else {
				f.Path = v
			}
		} else {
			ok = false
		}
	} else {
		ok = false
	}
	if a := content.Attributes["mode"]; a != nil {
		if m, good := l.attrMode(a); good {
			if m&0o077 != 0 || m&0o400 == 0 {
				l.errorf(a.Expr.Range(), "Invalid credential file mode",
					"%04o: a credential file is readable by its owner and nobody else (group and others get no bits); write \"0600\" or \"0400\".", m)
				ok = false
			} else {
				f.Mode = m
			}
		} else {
			ok = false
		}
	}
	if a := content.Attributes["owner"]; a != nil {
		if v, good := l.attrString(a); good {
			if v != "root" && !validUserName(v) {
				l.errorf(a.Expr.Range(), "Invalid owner", "%q is not a user name.", v)
				ok = false
			} else {
				f.Owner = v
			}
		} else {
			ok = false
		}
	}
	if ok {
		s.File = f
	}
}

// checkTokenHost checks that a sandbox's egress reaches the token
// endpoint of an OAuth secret it uses, inspected (not passthrough): the
// host sends the refresh token there only for the guest's requests it
// sees, and a secret never widens egress.
func (l *loader) checkTokenHost(sb *Sandbox, s *Secret, rng hcl.Range, allow []policy.AllowRule, egress []blockRef) {
	if s.OAuth == nil {
		return
	}
	h, err := policy.ParseHostPattern(s.OAuth.TokenHost())
	if err != nil {
		return
	}
	if !allowCovers(allow, h) {
		l.errorf(rng, "Token endpoint not allowed by egress",
			"secret.%s refreshes its login at %s, but the egress of sandbox.%s (%s) does not allow %s. A secret never widens egress: add the host to an egress block's allow list.",
			s.Name, s.OAuth.TokenURL, sb.Name, egressList(egress), h)
		return
	}
	if g, ok := policy.Effective(allow, h); ok && g.Passthrough {
		l.errorf(rng, "Token endpoint is passthrough",
			"secret.%s refreshes its login at %s, but the egress of sandbox.%s lets %s through without inspection (passthrough, as in %s, %s:%d), so the host cannot broker the refresh. Take it out of passthrough.",
			s.Name, s.OAuth.TokenURL, sb.Name, h, g.Origin.Block, g.Origin.File, g.Origin.Line)
	}
}
