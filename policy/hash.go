package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
)

// hashVersion opens the encoding Hash hashes; change it whenever the
// encoding changes.
const hashVersion = "sbx-policy-v1\n"

// Hash returns "sha256:<hex>" over a canonical encoding of p that leaves
// out every Origin: moving a rule to another file or line, or into another
// block, does not change the hash; changing what any rule allows does.
// A CA counts by its content alone (Fingerprint), not its path.
// Rules are hashed in the order p holds them, which is canonical for a
// policy built by package lang. A nil list and an empty one hash the same.
func Hash(p Sandbox) string {
	// The request rules and CAs came after hashVersion 1: each is left
	// out when empty, so a policy without them hashes as it always did.
	type allow struct {
		Pattern     string   `json:"pattern"`
		Passthrough bool     `json:"passthrough,omitempty"`
		Methods     []string `json:"methods,omitempty"`
		Paths       []string `json:"paths,omitempty"`
		GitPush     []string `json:"git_push,omitempty"`
	}
	type tcp struct {
		Dest string `json:"dest"`
	}
	type mapping struct {
		Name string `json:"name"`
		Addr string `json:"addr"`
	}
	type secret struct {
		Name   string   `json:"name"`
		Env    string   `json:"env"`
		Hosts  []string `json:"hosts,omitempty"`
		Source string   `json:"source"`
		// Headers and PlainHTTP came later: left out when empty, so that
		// the hash of a policy without them is what it was.
		Headers   []string `json:"headers,omitempty"`
		PlainHTTP []string `json:"plain_http,omitempty"`
		// AWS came later still, likewise.
		AWS *AWSCredential `json:"aws,omitempty"`
		// OAuth and File came later still, left out when unset.
		OAuth *OAuth      `json:"oauth,omitempty"`
		File  *SecretFile `json:"file,omitempty"`
		// Body and WebSocket came later still, left out when unset.
		Body      []string `json:"body,omitempty"`
		WebSocket *string  `json:"websocket,omitempty"`
	}
	type mount struct {
		Guest    string   `json:"guest"`
		Host     string   `json:"host"`
		Access   Access   `json:"access"`
		Hide     []string `json:"hide,omitempty"`
		ReadOnly []string `json:"readonly,omitempty"`
		Tmpfs    []string `json:"tmpfs,omitempty"`
		Owner    string   `json:"owner"`
		// GitWritable came later: left out when false, so that the
		// hashes of the policies before it stay what they were.
		GitWritable bool `json:"git_writable,omitempty"`
	}
	var c struct {
		Allow   []allow   `json:"allow,omitempty"`
		TCP     []tcp     `json:"tcp,omitempty"`
		Hosts   []mapping `json:"hosts,omitempty"`
		Secrets []secret  `json:"secrets,omitempty"`
		Mounts  []mount   `json:"mounts,omitempty"`
		// CAs are the sha256 of each CA's PEM, sorted and without
		// repeats: a CA is what it says, wherever its file lives.
		CAs []string `json:"cas,omitempty"`
		// ForbidEnv came later still: left out when empty, as above.
		ForbidEnv []string `json:"forbid_env,omitempty"`
	}
	for _, r := range p.Allow {
		c.Allow = append(c.Allow, allow{r.Pattern.String(), r.Passthrough, r.Methods, r.Paths, r.GitPush})
	}
	for _, r := range p.TCP {
		c.TCP = append(c.TCP, tcp{r.Dest.String()})
	}
	for _, r := range p.Hosts {
		c.Hosts = append(c.Hosts, mapping{r.Name, r.Addr})
	}
	for _, s := range p.Secrets {
		var hosts []string
		for _, h := range s.Hosts {
			hosts = append(hosts, h.String())
		}
		var plain []string
		for _, hp := range s.PlainHTTP {
			plain = append(plain, hp.String())
		}
		var body []string
		for _, b := range s.Body {
			body = append(body, b.Key())
		}
		sort.Strings(body)
		var ws *string
		if s.WebSocket != nil {
			j := s.WebSocket.JSON
			ws = &j
		}
		c.Secrets = append(c.Secrets, secret{Name: s.Name, Env: s.Env, Hosts: hosts, Source: s.Source,
			Headers: s.Headers, PlainHTTP: plain, AWS: s.AWS, OAuth: s.OAuth, File: s.File, Body: body, WebSocket: ws})
	}
	for _, m := range p.Mounts {
		c.Mounts = append(c.Mounts, mount{m.Guest, m.Host, m.Access, m.Hide, m.ReadOnly, m.Tmpfs, m.Owner, m.GitWritable})
	}
	for _, ca := range p.CAs {
		c.CAs = append(c.CAs, ca.Fingerprint())
	}
	sort.Strings(c.CAs)
	c.CAs = slices.Compact(c.CAs)
	c.ForbidEnv = p.ForbidEnv
	data, err := json.Marshal(&c)
	if err != nil {
		// Only strings and slices of strings are encoded; this cannot fail.
		panic("policy: encoding for Hash: " + err.Error())
	}
	sum := sha256.Sum256(append([]byte(hashVersion), data...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Fingerprint returns "sha256:<hex>" of the CA's PEM, which is what makes
// two CAs the same.
func (c CA) Fingerprint() string {
	sum := sha256.Sum256([]byte(c.PEM))
	return "sha256:" + hex.EncodeToString(sum[:])
}
