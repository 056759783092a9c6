package policy

import "slices"

// Sandbox is the effective policy of one sandbox: the union of the egress,
// secret and vfs blocks it names, flattened and sorted so that two equal
// policies are equal values and hash the same.
//
// Origin fields say where a rule came from, for plans and the audit log;
// they are not part of the policy's identity (Hash and Compare ignore them).
type Sandbox struct {
	Allow   []AllowRule     `json:"allow"`
	TCP     []TCPRule       `json:"tcp"`
	Hosts   []HostMapping   `json:"hosts"`
	Secrets []SecretBinding `json:"secrets"`
	Mounts  []Mount         `json:"mounts"`
	// CAs are extra certificate authorities the host trusts, besides the
	// system's roots, when it verifies the upstream servers of allowed
	// HTTPS hosts (a company proxy, a test server).
	CAs []CA `json:"cas,omitempty"`
	// ForbidEnv are patterns of environment variable names that must
	// never reach the guest's environment (CheckEnvPattern says what a
	// pattern is): package lang refuses a configuration whose sandbox,
	// image or secrets set such a name, and every command started in the
	// sandbox is refused one (sandboxnet.CheckEnv). Adding a pattern
	// narrows the policy; removing one widens it.
	ForbidEnv []string `json:"forbid_env,omitempty"`
	// ForbidEnvOrigin is where ForbidEnv is declared (the sandbox block's
	// forbid_env attribute), for errors that name it.
	ForbidEnvOrigin Origin `json:"forbid_env_origin,omitzero"`
}

// CA is one upstream certificate authority an egress block adds.
type CA struct {
	// Path is the PEM file as the spec names it, relative to the
	// configuration directory.
	Path string `json:"path"`
	// PEM holds the file's certificates, read when the configuration is
	// loaded and re-encoded (package lang refuses a file with anything
	// but certificates in it): certificates are public, and the
	// supervisor needs them without reading the checkout again. Its
	// sha256 (Fingerprint) is the CA's identity in Hash and Compare.
	PEM    string `json:"pem"`
	Origin Origin `json:"origin"`
}

// Origin names the spec block and source position a rule came from.
type Origin struct {
	Block string `json:"block"` // e.g. "egress.llm"
	File  string `json:"file,omitempty"`
	Line  int    `json:"line,omitempty"`
}

// AllowRule permits HTTP and HTTPS to hosts matching Pattern.
//
// Every connection is terminated on the host and each request checked
// against the connection's name, unless Passthrough is set: then a TLS
// connection is spliced to the upstream after its SNI is checked, for
// clients that pin certificates (its requests are not seen, so neither
// request rules nor secrets apply to it).
//
// Methods, Paths and GitPush narrow what requests may do: when Methods is
// not empty only those HTTP methods pass; when Paths is not empty only
// request paths matching one of its patterns ("/v1/**", "*" within a
// segment, "**" across segments; see match.CompilePath); when GitPush is
// not empty a git smart-HTTP push (git-receive-pack) may update only refs
// matching one of its patterns ("refs/heads/agent/*"; match.CompileRef).
// Package policy/match holds that pattern language, and the egress engine
// applies it. A policy holds at most one
// rule per pattern; when patterns overlap, every rule whose pattern
// matches a host applies to it (RulesFor): a request passes when one of
// them admits both its method and its path.
type AllowRule struct {
	Pattern     HostPattern `json:"pattern"`
	Passthrough bool        `json:"passthrough,omitempty"`
	Methods     []string    `json:"methods,omitempty"`
	Paths       []string    `json:"paths,omitempty"`
	GitPush     []string    `json:"git_push,omitempty"`
	Origin      Origin      `json:"origin"`
}

// TCPRule permits raw TCP to one host and port.
type TCPRule struct {
	Dest   HostPort `json:"dest"`
	Origin Origin   `json:"origin"`
}

// HostMapping pins a host name to an address ("ip:port"), e.g. for local
// fixtures or a model server on the host. Mapped names are reachable even
// when the address is loopback or private; nothing else is.
type HostMapping struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	Origin Origin `json:"origin"`
}

// SecretBinding brokers one credential: the guest sees a placeholder in Env,
// and the host substitutes the real value only in requests to Hosts. Source
// is where the spec says the host reads the value ("env:NAME",
// "file:PATH", "command:...", or empty); the user's bindings file, which
// is not part of the policy, may say otherwise, and a spec's command is
// never run (package bindings chooses). The value itself never appears
// in policy, state or plans.
//
// The value is substituted only where a credential goes, and only as a
// whole: as the token of "Authorization: Bearer", as the password of
// "Authorization: Basic", and as the whole value of each header Headers
// names (lower case, e.g. "x-api-key"). It is substituted only into
// requests that leave the host over verified TLS, except to the exact
// host:port destinations PlainHTTP lists.
type SecretBinding struct {
	Name      string        `json:"name"`
	Env       string        `json:"env"`
	Hosts     []HostPattern `json:"hosts"`
	Headers   []string      `json:"headers,omitempty"`
	PlainHTTP []HostPort    `json:"plain_http,omitempty"`
	Source    string        `json:"source"`
	// AWS, when set, makes the secret an AWS credential re-signed on the
	// host (AWSCredential); Headers and PlainHTTP are then empty.
	AWS *AWSCredential `json:"aws,omitempty"`
	// OAuth, when set, makes the secret an OAuth login brokered on the
	// host (see OAuth); File, when set, delivers its credential file,
	// with placeholders, into the guest.
	OAuth *OAuth      `json:"oauth,omitempty"`
	File  *SecretFile `json:"file,omitempty"`
	// Body lists the request bodies the value is substituted into
	// (BodyField), and WebSocket, when set, lets it be substituted into
	// the guest's WebSocket messages to the secret's hosts
	// (WebSocketField). Both are opt-in and whole-token only.
	Body      []BodyField     `json:"body,omitempty"`
	WebSocket *WebSocketField `json:"websocket,omitempty"`
	Origin    Origin          `json:"origin"`
}

// BodyField is one place in request bodies a secret's value goes: in a
// request to Host (an exact name the secret's hosts cover) whose path is
// exactly Path, the whole value of the urlencoded form field Form, or
// the whole string value at the dot-separated JSON path JSON (one of
// the two is set). A placeholder anywhere else in such a body refuses
// the request, as does one in the body of any other request to the
// secret's hosts.
type BodyField struct {
	Host   string `json:"host"`
	Path   string `json:"path"`
	Form   string `json:"form_field,omitempty"`
	JSON   string `json:"json_field,omitempty"`
	Origin Origin `json:"origin"`
}

// Key identifies a body field in comparisons: its host, path and field.
func (b BodyField) Key() string {
	k := b.Host + b.Path
	if b.Form != "" {
		k += " form field " + b.Form
	}
	if b.JSON != "" || b.Form == "" {
		k += " JSON field " + b.JSON
	}
	return k
}

// WebSocketField lets a secret's value be substituted into the text
// messages the guest sends over a WebSocket to the secret's hosts: a
// message whose whole content is the placeholder when JSON is empty,
// else the whole string value at the dot-separated JSON path JSON of a
// message that is a JSON object. A placeholder anywhere else in a
// message to those hosts closes the stream.
type WebSocketField struct {
	JSON   string `json:"json_field,omitempty"`
	Origin Origin `json:"origin"`
}

// Place says where in a message the value goes, for plans.
func (w WebSocketField) Place() string {
	if w.JSON == "" {
		return "a text message whose whole content is the placeholder"
	}
	return "JSON field " + w.JSON + " of a text message"
}

// AWSCredential declares a secret as an AWS credential: its source
// yields an access key id, a secret access key and an optional session
// token, and the guest gets placeholders for them (the access key id's
// in the secret's Env, the others in SecretKeyEnv and SessionTokenEnv).
// A request to one of the secret's hosts signed with Signature Version 4
// and the placeholders is verified on the host and re-signed with the
// real credential, for a credential scope whose service is one of
// Services and whose region is one of Regions; nothing else carries the
// credential.
type AWSCredential struct {
	Services        []string `json:"services"`
	Regions         []string `json:"regions"`
	SecretKeyEnv    string   `json:"secret_key_env"`
	SessionTokenEnv string   `json:"session_token_env"`
}

// Access is the base access mode of a mount.
type Access string

// Mount access modes.
const (
	ReadOnly  Access = "ro"
	ReadWrite Access = "rw"
)

// Mount exposes a host directory at a guest path, with path rules relative
// to the mount root (gitignore-style globs).
type Mount struct {
	Guest string `json:"guest"`
	// Host is the host directory, cleaned. A relative path is relative to
	// the configuration directory (it stays relative here so that two
	// copies of a configuration compare equal); join it with Config.Dir
	// to use it.
	Host     string   `json:"host"`
	Access   Access   `json:"access"`
	Hide     []string `json:"hide"`
	ReadOnly []string `json:"readonly"`
	Tmpfs    []string `json:"tmpfs"`
	// GitWritable turns off the file server's protection of the git
	// directories in a read-write mount (package vfs's gitGuard): the
	// guest may then write their configuration, hooks and redirections,
	// which git on the host reads and runs.
	GitWritable bool   `json:"git_writable,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Origin      Origin `json:"origin"`
}

// SameServed reports whether m and o are served alike: the same guest
// path, host directory, access, hide, read-only and tmpfs rules, git
// protection and owner. Only where the rule was written (Origin) may
// differ. A running sandbox's file server keeps the rules it started
// with, so a mount that is not served alike needs a new sandbox.
func (m Mount) SameServed(o Mount) bool {
	return m.Guest == o.Guest && m.Host == o.Host && m.Access == o.Access &&
		slices.Equal(m.Hide, o.Hide) && slices.Equal(m.ReadOnly, o.ReadOnly) &&
		slices.Equal(m.Tmpfs, o.Tmpfs) && m.GitWritable == o.GitWritable && m.Owner == o.Owner
}

// SameMountsServed reports whether a and b are the same mounts, in the
// same order, each served alike (Mount.SameServed).
func SameMountsServed(a, b []Mount) bool {
	return slices.EqualFunc(a, b, Mount.SameServed)
}
