package egress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/policy"
)

// The kinds of secret the classification tests generate besides a
// header secret: an AWS credential (re-signed for its services and
// regions), an OAuth login (its refresh brokered at its token URL) and a
// secret with body fields. Their credentials are made once per process.

var (
	genServices  = []string{"s3", "bedrock"}
	genRegions   = []string{"us-east-1", "eu-west-1"}
	genTokenURLs = []string{"https://api.example.com/token", "https://b.example.com/oauth/token", "https://api.github.com/a"}
	genBodyPaths = []string{"/token", "/a", "/oauth/token"}
	genFields    = []policy.BodyField{{Form: "client_secret"}, {JSON: "auth.key"}}
)

type classifyCreds struct {
	awsPH, awsReal map[string]sigv4.Credential
	logins         map[string]*oauth.Login
	err            error
}

var (
	credsOnce sync.Once
	creds     classifyCreds
)

// classifyCredentials returns, for each of genSecrets, an AWS
// placeholder and real credential and an OAuth login on a credential
// file of its own.
func classifyCredentials() classifyCreds {
	credsOnce.Do(func() {
		creds = classifyCreds{awsPH: map[string]sigv4.Credential{}, awsReal: map[string]sigv4.Credential{}, logins: map[string]*oauth.Login{}}
		dir, err := os.MkdirTemp("", "sbx-classify-")
		if err != nil {
			creds.err = err
			return
		}
		for _, name := range genSecrets {
			ph, err := sigv4.Placeholder()
			if err != nil {
				creds.err = err
				return
			}
			creds.awsPH[name] = ph
			creds.awsReal[name] = sigv4.Credential{AccessKeyID: "AKIAREAL" + strings.ToUpper(name) + "00000000",
				SecretAccessKey: "real-secret-key-of-" + name + "-0123456789abcdef", SessionToken: "real-session-" + name + "-0123456789"}
			file := filepath.Join(dir, name+".json")
			doc, _ := json.Marshal(map[string]any{"tokens": map[string]string{
				"access_token": "real-access-" + name + "-0123456789abcdef", "refresh_token": "real-refresh-" + name + "-0123456789abcdef"}})
			if err := os.WriteFile(file, doc, 0o600); err != nil {
				creds.err = err
				return
			}
			l, err := oauth.Open(name, genOAuth(genTokenURLs[0]), file, oauth.Options{})
			if err != nil {
				creds.err = err
				return
			}
			if _, err := l.Render(); err != nil {
				creds.err = err
				return
			}
			creds.logins[name] = l
		}
	})
	return creds
}

func genOAuth(tokenURL string) policy.OAuth {
	return policy.OAuth{TokenURL: tokenURL, RefreshField: "refresh_token", AccessToken: "tokens.access_token", RefreshToken: "tokens.refresh_token"}
}

// secretKind gives s one kind at random: as it is (a header secret),
// with body fields, an AWS credential or an OAuth login.
func (g gen) secretKind(s *policy.SecretBinding) {
	switch g.c.intn(5) {
	case 0:
		g.toggleAWS(s)
	case 1:
		g.toggleOAuth(s)
	case 2:
		g.toggleBody(s)
	}
}

// toggleAWS makes s an AWS credential, or a header secret again.
func (g gen) toggleAWS(s *policy.SecretBinding) {
	if s.AWS != nil {
		s.AWS = nil
		return
	}
	s.OAuth, s.Body, s.PlainHTTP, s.Headers = nil, nil, nil, nil
	s.AWS = &policy.AWSCredential{Services: g.subset(genServices), Regions: g.subset(genRegions),
		SecretKeyEnv: strings.ToUpper(s.Name) + "_SECRET", SessionTokenEnv: strings.ToUpper(s.Name) + "_TOKEN"}
}

// toggleOAuth makes s an OAuth login, or a header secret again.
func (g gen) toggleOAuth(s *policy.SecretBinding) {
	if s.OAuth != nil {
		s.OAuth = nil
		return
	}
	s.AWS, s.Body = nil, nil
	o := genOAuth(g.pick(genTokenURLs))
	s.OAuth = &o
}

// toggleBody adds a body field to s (for a host its hosts cover) or
// takes one out; AWS and OAuth secrets take none (package lang).
func (g gen) toggleBody(s *policy.SecretBinding) {
	if s.AWS != nil || s.OAuth != nil {
		return
	}
	host := g.pick(genNames)
	if !slices.ContainsFunc(s.Hosts, func(h policy.HostPattern) bool { return h.Match(host) }) {
		return
	}
	f := genFields[g.c.intn(len(genFields))]
	f.Host, f.Path = host, g.pick(genBodyPaths)
	if i := slices.IndexFunc(s.Body, func(b policy.BodyField) bool { return b.Key() == f.Key() }); i >= 0 {
		s.Body = slices.Delete(slices.Clone(s.Body), i, i+1)
		if len(s.Body) == 0 {
			s.Body = nil
		}
		return
	}
	s.Body = append(slices.Clone(s.Body), f)
}

// editKind changes what kind of secret s is, or what it is brokered for.
func (g gen) editKind(s *policy.SecretBinding) {
	switch {
	case s.AWS != nil && g.chance(2):
		a := *s.AWS
		if g.chance(2) {
			a.Services = toggle(a.Services, g.pick(genServices))
		} else {
			a.Regions = toggle(a.Regions, g.pick(genRegions))
		}
		s.AWS = &a
	case s.OAuth != nil && g.chance(2):
		o := genOAuth(g.pick(genTokenURLs))
		s.OAuth = &o
	default:
		g.secretKind(s)
	}
}

// compileKinds compiles p with a value, placeholder and login for every
// kind of secret.
func compileKinds(p policy.Sandbox) (*Policy, error) {
	c := classifyCredentials()
	if c.err != nil {
		return nil, c.err
	}
	values, placeholders, logins := map[string][]byte{}, map[string]string{}, map[string]*oauth.Login{}
	for _, s := range p.Secrets {
		switch {
		case s.AWS != nil:
			values[s.Name] = c.awsReal[s.Name].Compact()
			placeholders[s.Name] = sigv4.PlaceholderString(c.awsPH[s.Name])
		case s.OAuth != nil:
			logins[s.Name] = c.logins[s.Name]
		default:
			values[s.Name] = []byte(secretValue(s.Name))
			placeholders[s.Name] = secretPlaceholder(s.Name)
		}
	}
	return CompileLogins(p, values, placeholders, logins)
}

// kindProbes are requests aimed at what random probes seldom hit: each
// token URL, body field and AWS service and region of either side.
func kindProbes(g gen, sides ...policy.Sandbox) []probe {
	var out []probe
	for _, sb := range sides {
		for _, s := range sb.Secrets {
			if s.OAuth != nil {
				host, path := tokenHostPath(s.OAuth.TokenURL)
				out = append(out, probe{host: host, port: 443, tls: true, method: "POST", path: path, refresh: true})
			}
			for _, b := range s.Body {
				for _, f := range genFields {
					out = append(out, probe{host: b.Host, port: 443, tls: true, method: "POST", path: b.Path, secret: s.Name, body: f})
				}
			}
			if s.AWS != nil {
				for _, h := range genNames {
					for _, sv := range genServices {
						for _, rg := range genRegions {
							out = append(out, probe{host: h, port: 443, tls: true, method: g.pick(genMethods), path: g.pick(genPaths), secret: s.Name,
								aws: [2]string{sv, rg}})
						}
					}
				}
			}
		}
	}
	return out
}

func tokenHostPath(u string) (string, string) {
	rest := strings.TrimPrefix(u, "https://")
	host, path, _ := strings.Cut(rest, "/")
	return host, "/" + path
}

// probeBody is the body of a probe that puts the secret in a body field.
func probeBody(q probe, ph string) (string, string) {
	if q.body.Form != "" {
		return "application/x-www-form-urlencoded", q.body.Form + "=" + ph
	}
	return "application/json", fmt.Sprintf(`{"auth":{"key":%q}}`, ph)
}

// signProbe signs r (with no body) with the AWS placeholder credential
// of secret, as an SDK in the guest would.
func signProbe(r *http.Request, secret string, scope [2]string) {
	ph := classifyCredentials().awsPH[secret]
	sum := sha256.Sum256(nil)
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ph.AccessKeyID, SecretAccessKey: ph.SecretAccessKey, SessionToken: ph.SessionToken},
		r, hex.EncodeToString(sum[:]), scope[0], scope[1], awsSignTime)
	if err != nil {
		panic(err)
	}
}

// isLogin reports whether the policy brokers secret name as a login.
func (p *Policy) isLogin(name string) bool {
	for _, ls := range p.logins {
		if ls.Name == name {
			return true
		}
	}
	return false
}
