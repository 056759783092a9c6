package sandboxnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/egress"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/egress/netstack"
	"github.com/sbx-dev/sbx/internal/egress/oauth"
	"github.com/sbx-dev/sbx/internal/egress/secretsrc"
	"github.com/sbx-dev/sbx/internal/egress/sigv4"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/policy"
)

// GuestInterface is the guest's one network interface.
const GuestInterface = "eth0"

// Options configure New.
type Options struct {
	// Sandbox names the sandbox in audit entries.
	Sandbox string
	// Policy is the sandbox's effective policy.
	Policy policy.Sandbox
	// Secrets holds the value of every secret Policy binds, by name
	// (ResolveSecrets). For an OAuth secret (one with an oauth block)
	// it is the absolute path of the host's credential file, whose
	// tokens the network brokers (package oauth) and never reads into
	// this map.
	Secrets map[string][]byte
	// AuditDir is where the audit log (audit.File) is written; empty
	// means none.
	AuditDir string
	// CA mints the certificates the guest sees; nil means the user's
	// (ca.LoadOrCreate in ca.DefaultDir).
	CA *ca.Authority
	// Upstream tunes how the host reaches upstream servers.
	Upstream egress.UpstreamOptions
	// Logger receives what goes wrong; nil discards it.
	Logger *slog.Logger
}

// Net is one sandbox's network. Its methods are safe for concurrent use.
type Net struct {
	eng  *egress.Engine
	ns   *netstack.Network
	aud  *audit.Writer
	auth *ca.Authority

	// updating serializes Update, so that the engine enforces the
	// policy whose placeholders and variables are recorded below.
	updating sync.Mutex

	mu           sync.Mutex
	placeholders map[string]string // secret name → placeholder
	envs         map[string]string // secret name → its env variable
	// logins are the OAuth secrets' logins by name, each opened on its
	// credential file once and kept across updates (the guest holds
	// their placeholders); files are the guest's copies of the
	// credential files of those with a file block, rendered when the
	// login was opened.
	logins map[string]*openLogin

	// stop ends the goroutine that writes summaries of the refusals the
	// stack did not report (over its rate); done is closed once it has.
	stop, done chan struct{}
	// endRefresh ends the host's own refreshes of the logins
	// (egress.Engine.SelfRefresh); refreshed is closed once they ended.
	endRefresh context.CancelFunc
	refreshed  chan struct{}
	lost       uint64 // refusals already summarized; only that goroutine and Close touch it
	lostSYNs   uint64 // dropped SYNs already summarized, likewise
}

// New builds the network for a sandbox. A secret of the policy without a
// value in opts.Secrets is an error.
func New(opts Options) (*Net, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	auth := opts.CA
	if auth == nil {
		dir, err := ca.DefaultDir()
		if err != nil {
			return nil, fmt.Errorf("sandbox network: %w", err)
		}
		if auth, err = ca.LoadOrCreate(dir); err != nil {
			return nil, fmt.Errorf("sandbox network: %w", err)
		}
	}
	n := &Net{auth: auth, placeholders: map[string]string{}, envs: map[string]string{}, logins: map[string]*openLogin{}}
	pol, err := n.compile(opts.Policy, opts.Secrets)
	if err != nil {
		return nil, err
	}
	if opts.AuditDir != "" {
		if n.aud, err = audit.Open(opts.AuditDir, audit.Options{Sandbox: opts.Sandbox}); err != nil {
			return nil, fmt.Errorf("sandbox network: %w", err)
		}
	}
	n.eng, err = egress.NewEngine(pol, egress.Options{CA: auth, Audit: n.aud, Upstream: opts.Upstream, Logger: log})
	if err != nil {
		n.closeAudit()
		return nil, fmt.Errorf("sandbox network: %w", err)
	}
	n.ns, err = netstack.New(netstack.Options{
		Resolve: func(name string) bool { return n.eng.Policy().Resolves(name) },
		Accept:  func(name string, port uint16) bool { return n.eng.Policy().Accepts(name, port) },
		Handle: func(ctx context.Context, f netstack.Flow, conn net.Conn) {
			n.eng.ServeFlow(ctx, f.Name, f.Port, conn)
		},
		Deny: n.denied,
	})
	if err != nil {
		n.eng.Close()
		n.closeAudit()
		return nil, fmt.Errorf("sandbox network: %w", err)
	}
	n.stop, n.done = make(chan struct{}), make(chan struct{})
	go n.summarize()
	var rctx context.Context
	rctx, n.endRefresh = context.WithCancel(context.Background())
	n.refreshed = make(chan struct{})
	go func() {
		defer close(n.refreshed)
		n.eng.SelfRefresh(rctx, 0)
	}()
	return n, nil
}

// summaryEvery is how often the refusals the stack could not report are
// counted into the audit log.
const summaryEvery = time.Second

// summarize writes, while the network runs, audit entries counting the
// refusals the stack dropped over its report rate and the SYNs it dropped
// over its handshake limit, so that a guest that hides a probe among a
// flood of refusals leaves a trace saying entries were lost.
func (n *Net) summarize() {
	defer close(n.done)
	t := time.NewTicker(summaryEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			n.summarizeLost()
			return
		case <-t.C:
			n.summarizeLost()
		}
	}
}

func (n *Net) summarizeLost() {
	denials, syns := n.ns.Dropped()
	if n.aud == nil {
		return
	}
	if denials > n.lost {
		n.aud.Log(audit.Entry{
			Time: time.Now(), Proto: audit.ProtoAudit, Decision: audit.DecisionDropped, Dropped: int64(denials - n.lost),
			Reason: "the network refused more than it reports a second; these refusals are not listed",
		})
		n.lost = denials
	}
	if syns > n.lostSYNs {
		n.aud.Log(audit.Entry{
			Time: time.Now(), Proto: audit.ProtoAudit, Decision: audit.DecisionDropped, Dropped: int64(syns - n.lostSYNs),
			Reason: "connection attempts dropped while the sandbox had too many handshakes in progress (a SYN flood)",
		})
		n.lostSYNs = syns
	}
}

// compile compiles p with the secrets' values, giving each secret a
// placeholder the first time it is seen and keeping it after.
func (n *Net) compile(p policy.Sandbox, values map[string][]byte) (*egress.Policy, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ph := map[string]string{}
	envs := map[string]string{}
	secretIn := map[string]string{}
	logins := map[string]*openLogin{}
	for _, s := range p.Secrets {
		if err := checkSecretEnv(p, s, secretIn); err != nil {
			return nil, fmt.Errorf("sandbox network: %w", err)
		}
		if _, ok := values[s.Name]; !ok {
			return nil, fmt.Errorf("sandbox network: secret.%s has no value", s.Name)
		}
		if s.OAuth != nil {
			ol, err := n.openLogin(s, string(values[s.Name]))
			if err != nil {
				return nil, fmt.Errorf("sandbox network: %w", err)
			}
			logins[s.Name] = ol
			envs[s.Name] = s.Env
			continue
		}
		v, ok := n.placeholders[s.Name]
		if _, err := sigv4.ParsePlaceholder(v); ok && (err == nil) != (s.AWS != nil) {
			ok = false // the secret became, or ceased to be, an AWS credential
		}
		if !ok {
			var err error
			if v, err = newPlaceholder(s); err != nil {
				return nil, fmt.Errorf("sandbox network: %w", err)
			}
		}
		ph[s.Name] = v
		envs[s.Name] = strings.Join(secretEnvs(s), ",")
	}
	opened := make(map[string]*oauth.Login, len(logins))
	for name, ol := range logins {
		opened[name] = ol.login
	}
	pol, err := egress.CompileLogins(p, values, ph, opened)
	if err != nil {
		return nil, fmt.Errorf("sandbox network: %w", err)
	}
	n.placeholders, n.envs, n.logins = ph, envs, logins
	return pol, nil
}

// newPlaceholder makes the placeholder of secret s: for an AWS
// credential, a placeholder credential (sigv4.Placeholder).
func newPlaceholder(s policy.SecretBinding) (string, error) {
	if s.AWS == nil {
		return secretsrc.Placeholder(s.Name)
	}
	c, err := sigv4.Placeholder()
	if err != nil {
		return "", err
	}
	return sigv4.PlaceholderString(c), nil
}

// openLogin is an OAuth secret's login and the guest's copy of its
// credential file.
type openLogin struct {
	path  string
	spec  policy.OAuth
	login *oauth.Login
	file  *policy.SecretFile
	data  []byte
}

// openLogin returns the login of OAuth secret s on the credential file
// at path: the one already open when neither changed, else a new one,
// whose guest copy is rendered now. The caller holds n.mu.
func (n *Net) openLogin(s policy.SecretBinding, path string) (*openLogin, error) {
	if old, ok := n.logins[s.Name]; ok && old.path == path && old.spec == *s.OAuth {
		old.file = s.File
		return old, nil
	}
	l, err := oauth.Open(s.Name, *s.OAuth, path, oauth.Options{})
	if err != nil {
		return nil, err
	}
	data, err := l.Render()
	if err != nil {
		return nil, err
	}
	return &openLogin{path: path, spec: *s.OAuth, login: l, file: s.File, data: data}, nil
}

// CredentialFile is a credential file the guest gets: an OAuth
// secret's, rendered with placeholders for its tokens (package oauth).
type CredentialFile struct {
	// Secret names the secret.
	Secret string
	// Path, Mode and Owner are the file block's.
	Path  string
	Mode  uint32
	Owner string
	// Data is the file's content: placeholders, never a real token.
	Data []byte
}

// CredentialFiles returns the credential files the guest must be given,
// sorted by path.
func (n *Net) CredentialFiles() []CredentialFile {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []CredentialFile
	for name, ol := range n.logins {
		if ol.file == nil {
			continue
		}
		out = append(out, CredentialFile{Secret: name, Path: ol.file.Path, Mode: ol.file.Mode, Owner: ol.file.Owner, Data: slices.Clone(ol.data)})
	}
	slices.SortFunc(out, func(a, b CredentialFile) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// checkSecretEnv refuses the variable a secret's placeholder goes in
// when package lang would: one that is no name, one another secret
// already uses (secretIn, from variable to secret, records them), one a
// forbid_env pattern of p keeps out of the guest. A policy reaches
// Update from the Go API or a reload without passing through lang.
func checkSecretEnv(p policy.Sandbox, s policy.SecretBinding, secretIn map[string]string) error {
	for _, env := range secretEnvs(s) {
		if env == "" || strings.ContainsAny(env, "=\x00") {
			return fmt.Errorf("secret.%s: %q is not an environment variable name", s.Name, env)
		}
		if other, ok := secretIn[env]; ok {
			return fmt.Errorf("secret.%s: %s is already the placeholder variable of secret.%s", s.Name, env, other)
		}
		secretIn[env] = s.Name
		if pat, ok := p.ForbiddenEnv(env); ok {
			return fmt.Errorf("secret.%s puts its placeholder in %s, which the forbid_env pattern %q keeps out of the guest's environment%s", s.Name, env, pat, originSuffix(p.ForbidEnvOrigin))
		}
	}
	return nil
}

// secretEnvs are the variables s puts placeholders in: its env, and an
// AWS credential's secret key and session token variables.
func secretEnvs(s policy.SecretBinding) []string {
	if s.AWS == nil {
		return []string{s.Env}
	}
	return []string{s.Env, s.AWS.SecretKeyEnv, s.AWS.SessionTokenEnv}
}

// denied writes what the stack refused to the audit log.
func (n *Net) denied(d netstack.Denial) {
	if n.aud == nil {
		return
	}
	e := audit.Entry{Time: d.Time, Proto: d.Proto, Name: d.Name, Decision: audit.DecisionDeny, Reason: d.Reason}
	if d.Dst.IsValid() {
		e.Dst = d.Dst.Addr().String()
		e.Port = d.Dst.Port()
	}
	n.aud.Log(e)
}

// Network is the machine's network device's backend.
func (n *Net) Network() machine.Network { return n.ns }

// CA is the authority whose certificate the guest trusts.
func (n *Net) CA() *ca.Authority { return n.auth }

// Configure is what the guest agent must be told: the interface's
// address, route and resolver, the CA, and each secret's placeholder in
// its variable.
func (n *Net) Configure() agentproto.Configure {
	gc := n.ns.GuestConfig()
	cfg := agentproto.Configure{
		Net: &agentproto.NetConfig{
			Interface: GuestInterface,
			Addr:      gc.Addr.String(),
			Gateway:   gc.Gateway.String(),
			DNS:       gc.DNS.String(),
			MTU:       gc.MTU,
		},
		CACertPEM: n.auth.CertPEM(),
	}
	for env, ph := range n.eng.Policy().Placeholders() {
		cfg.Env = append(cfg.Env, env+"="+ph)
	}
	n.mu.Lock()
	for name, ol := range n.logins {
		if ph := ol.login.AccessPlaceholder(); ph != "" {
			cfg.Env = append(cfg.Env, n.envs[name]+"="+ph)
		}
	}
	n.mu.Unlock()
	slices.Sort(cfg.Env)
	return cfg
}

// Placeholder returns the placeholder the guest sees for secret name.
func (n *Net) Placeholder(name string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.placeholders[name]
	return v, ok
}

// Update makes p, with the secrets' values, the policy of new connections
// and requests at once; connections to hosts p no longer allows are
// closed. It reports whether the guest must be configured again (a
// secret was added or its variable renamed, so the environment of new
// execs changes); the placeholders of secrets that stay are kept.
func (n *Net) Update(p policy.Sandbox, values map[string][]byte) (reconfigure bool, err error) {
	n.updating.Lock()
	defer n.updating.Unlock()
	n.mu.Lock()
	oldEnvs := n.envs
	n.mu.Unlock()
	pol, err := n.compile(p, values)
	if err != nil {
		return false, err
	}
	n.eng.Update(pol)
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(oldEnvs) != len(n.envs) {
		return true, nil
	}
	for name, env := range n.envs {
		if oldEnvs[name] != env {
			return true, nil
		}
	}
	return false, nil
}

// Close ends every connection and the host's own refreshes of the
// logins, and closes the audit log.
func (n *Net) Close() error {
	if n.stop != nil {
		select {
		case <-n.stop:
		default:
			close(n.stop)
		}
		<-n.done
	}
	if n.endRefresh != nil {
		n.endRefresh()
		<-n.refreshed
	}
	err := n.eng.Close()
	return errors.Join(err, n.closeAudit())
}

func (n *Net) closeAudit() error {
	if n.aud == nil {
		return nil
	}
	return n.aud.Close()
}

// SecretSources says where ResolveSecrets reads secrets' values.
type SecretSources struct {
	// ConfigDir is the directory of the configuration the policy is
	// from: bindings are chosen for it, and the spec's relative file:
	// sources are read in it.
	ConfigDir string
	// Bindings is the user's bindings file (package bindings); nil
	// means no bindings, so that only the spec's env: and file: sources
	// are read.
	Bindings *bindings.File
	// Environ is the environment env: sources are read from and
	// commands run with; nil means this process's.
	Environ []string
	// Values are secrets' values the caller read itself, by secret name
	// (sbx node reads them from Kubernetes Secrets): such a secret's
	// source is neither chosen nor read. A name the policy does not
	// declare is an error; an OAuth login cannot be given this way (its
	// tokens live in a credential file the host rewrites).
	Values map[string][]byte
}

// ResolveSecrets reads the value of each secret of p on the host, from
// the source bindings.Choose chooses for it: the user's binding for the
// configuration, else the spec's env: or file: source — never a
// command the spec names. Read with secretsrc.Resolve: env: from
// src.Environ, file: and command: relative to and in the directory
// Choose says (the configuration's for the spec's sources, the bindings
// file's for a binding's). Sources are chosen for every secret before
// any is read, so that a secret without one (a *bindings.UnboundError,
// saying what to bind) fails the start before a binding's command runs.
// A secret whose value src.Values gives takes it from there (checked as
// secretsrc.Value checks) and no source is chosen or read for it.
// The first failure is the error, naming the secret and where its source
// is written; a value never appears in an error.
func ResolveSecrets(ctx context.Context, p policy.Sandbox, src SecretSources) (map[string][]byte, error) {
	dir, err := filepath.Abs(src.ConfigDir)
	if err != nil {
		return nil, err
	}
	all := p
	p, given, err := withoutGiven(p, src.Values)
	if err != nil {
		return nil, err
	}
	choices := bindings.ChooseAll(src.Bindings, dir, p)
	for _, c := range choices {
		if c.Err != nil {
			return nil, c.Err
		}
	}
	oauthSecrets, awsSecrets := map[string]bool{}, map[string]bool{}
	for _, s := range all.Secrets {
		oauthSecrets[s.Name] = s.OAuth != nil
		awsSecrets[s.Name] = s.AWS != nil
	}
	values := make(map[string][]byte, len(choices)+len(given))
	for name, v := range given {
		v, err := secretsrc.Value(bytes.Clone(v), awsSecrets[name])
		if err != nil {
			for _, v := range values {
				clear(v)
			}
			return nil, fmt.Errorf("secret.%s: the value given: %w", name, err)
		}
		values[name] = v
	}
	for _, c := range choices {
		if oauthSecrets[c.Secret] {
			// The login's tokens stay in its file: the network opens
			// it there (package oauth) and writes refreshed ones back.
			path, err := secretsrc.FilePath(c.Source, c.Dir)
			if err != nil {
				for _, v := range values {
					clear(v)
				}
				return nil, fmt.Errorf("secret.%s%s is an OAuth login, read from a credential file: %w", c.Secret, originText(c), err)
			}
			values[c.Secret] = []byte(path)
			continue
		}
		v, err := secretsrc.Resolve(ctx, c.Source, secretsrc.Options{Dir: c.Dir, Environ: src.Environ, AWS: awsSecrets[c.Secret]})
		if err != nil {
			for _, v := range values {
				clear(v)
			}
			return nil, fmt.Errorf("secret.%s%s: %w", c.Secret, originText(c), err)
		}
		values[c.Secret] = v
	}
	return values, nil
}

// withoutGiven returns p without the secrets whose values are given, and
// those values; a given name p does not declare, or an OAuth login, is
// an error.
func withoutGiven(p policy.Sandbox, given map[string][]byte) (policy.Sandbox, map[string][]byte, error) {
	if len(given) == 0 {
		return p, nil, nil
	}
	var rest []policy.SecretBinding
	seen := 0
	for _, s := range p.Secrets {
		if _, ok := given[s.Name]; !ok {
			rest = append(rest, s)
			continue
		}
		if s.OAuth != nil {
			return p, nil, fmt.Errorf("secret.%s is an OAuth login, whose tokens the host keeps in a credential file: its value cannot be given directly", s.Name)
		}
		seen++
	}
	if seen != len(given) {
		for _, name := range slices.Sorted(maps.Keys(given)) {
			if !slices.ContainsFunc(p.Secrets, func(s policy.SecretBinding) bool { return s.Name == name }) {
				return p, nil, fmt.Errorf("a value is given for secret.%s, which the sandbox does not declare", name)
			}
		}
	}
	p.Secrets = rest
	return p, given, nil
}

// originText says where a chosen source is written, for errors:
// " (main.hcl:12)" or " (binding at ~/.config/sbx/bindings.hcl:3)".
func originText(c bindings.Choice) string {
	if c.Origin.File == "" {
		return ""
	}
	if c.From == bindings.FromBindings {
		return fmt.Sprintf(" (binding at %s:%d)", c.Origin.File, c.Origin.Line)
	}
	return fmt.Sprintf(" (%s:%d)", c.Origin.File, c.Origin.Line)
}
