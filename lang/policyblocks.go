package lang

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

var egressSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "allow"},
		{Name: "passthrough"},
		{Name: "tcp"},
		{Name: "hosts"},
		{Name: "ca"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "request", LabelNames: []string{"host"}}},
}

var requestSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "methods"},
		{Name: "paths"},
		{Name: "git_push"},
	},
}

func (l *loader) decodeEgress(b *hcl.Block) {
	e := &Egress{Name: b.Labels[0], DeclRange: b.DefRange}
	l.cfg.Egress[e.Name] = e
	l.decodeEgressBody(b.Body, e, "egress."+e.Name)
}

// decodeEgressBody reads an egress block's rules into e; block is the
// address the rules' origins name (egress.NAME, or a provision step's).
func (l *loader) decodeEgressBody(body hcl.Body, e *Egress, block string) {
	content, diags := body.Content(egressSchema)
	l.diags = append(l.diags, diags...)

	// index finds a pattern's rule in e.Allow: an entry written twice, in
	// allow or passthrough or both, is one rule.
	index := map[policy.HostPattern]int{}
	if a := content.Attributes["allow"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			p, err := policy.ParseHostPattern(it.Value)
			if err != nil {
				l.errorf(it.Range, "Invalid host pattern", "%v.", err)
				continue
			}
			if _, dup := index[p]; dup {
				continue
			}
			index[p] = len(e.Allow)
			e.Allow = append(e.Allow, policy.AllowRule{Pattern: p, Origin: l.origin(block, it.Range)})
		}
	}
	if a := content.Attributes["passthrough"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			p, err := policy.ParseHostPattern(it.Value)
			if err != nil {
				l.errorf(it.Range, "Invalid host pattern", "%v.", err)
				continue
			}
			// The passthrough entry is the rule's origin: it is what
			// plans and the audit log should point at.
			r := policy.AllowRule{Pattern: p, Passthrough: true, Origin: l.origin(block, it.Range)}
			if i, ok := index[p]; ok {
				e.Allow[i] = r
				continue
			}
			index[p] = len(e.Allow)
			e.Allow = append(e.Allow, r)
		}
	}
	requests := map[policy.HostPattern]hcl.Range{}
	for _, rb := range content.Blocks {
		l.decodeRequest(e, rb, index, requests)
	}
	if a := content.Attributes["tcp"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			hp, err := policy.ParseHostPort(it.Value)
			if err != nil {
				l.errorf(it.Range, "Invalid TCP destination", "%v.", err)
				continue
			}
			e.TCP = append(e.TCP, policy.TCPRule{Dest: hp, Origin: l.origin(block, it.Range)})
		}
	}
	if a := content.Attributes["hosts"]; a != nil {
		items, _ := l.attrStringMap(a)
		for _, it := range items {
			p, err := policy.ParseHostPattern(it.Key)
			if err != nil {
				l.errorf(it.KeyRange, "Invalid host name", "hosts maps host names to addresses: %v.", err)
				continue
			}
			if p.Wildcard {
				l.errorf(it.KeyRange, "Invalid host name", "hosts pins one name to one address; %q is a wildcard.", it.Key)
				continue
			}
			ap, err := netip.ParseAddrPort(it.Value)
			if err != nil || ap.Port() == 0 {
				l.errorf(it.Range, "Invalid address", "The address for %s must be IP:PORT, as in \"127.0.0.1:8443\" or \"[::1]:8443\"; %q is not.", p.Suffix, it.Value)
				continue
			}
			e.Hosts = append(e.Hosts, policy.HostMapping{Name: p.Suffix, Addr: ap.String(), Origin: l.origin(block, it.KeyRange)})
		}
	}
	if a := content.Attributes["ca"]; a != nil {
		items, _ := l.attrStrings(a)
		seen := map[string]bool{}
		for _, it := range items {
			ca, ok := l.readCA(block, it)
			if !ok || seen[ca.Path] {
				continue
			}
			seen[ca.Path] = true
			e.CAs = append(e.CAs, ca)
		}
		sort.Slice(e.CAs, func(i, j int) bool { return e.CAs[i].Path < e.CAs[j].Path })
	}
}

// decodeRequest applies a request block to the allow rule of its pattern
// in e. index locates rules by pattern; seen records the request blocks
// already decoded in e, by pattern.
func (l *loader) decodeRequest(e *Egress, b *hcl.Block, index map[policy.HostPattern]int, seen map[policy.HostPattern]hcl.Range) {
	content, diags := b.Body.Content(requestSchema)
	l.diags = append(l.diags, diags...)
	label := b.Labels[0]
	p, err := policy.ParseHostPattern(label)
	if err != nil {
		l.errorf(b.LabelRanges[0], "Invalid host pattern", "A request block is labelled with an allow entry of its egress block: %v.", err)
		return
	}
	if prev, dup := seen[p]; dup {
		l.errorf(b.DefRange, "Duplicate request block", "egress.%s already has a request block for %s at %s; write all of its rules in one block.", e.Name, p, rangeString(prev))
		return
	}
	seen[p] = b.DefRange
	i, allowed := index[p]
	if !allowed {
		l.errorf(b.LabelRanges[0], "Request rules for a host the block does not allow",
			"A request block narrows an allow entry of its own egress block, and egress.%s does not allow %s. Add %q to its allow list.%s",
			e.Name, p, p.String(), didYouMean(p.String(), rulePatterns(e.Allow), func(s string) string { return fmt.Sprintf("request %q", s) }))
		return
	}
	if e.Allow[i].Passthrough {
		l.errorf(b.LabelRanges[0], "Request rules for a passthrough host",
			"egress.%s lets %s through without inspection (passthrough), so its requests are never seen and request rules cannot apply. Remove it from passthrough to have its requests checked, or remove this block.",
			e.Name, p)
		return
	}
	r := e.Allow[i]
	ok := true
	lists := []struct {
		name  string
		dst   *[]string
		check func(string) error
		what  string
		noun  string // what leaving the list out lets through
	}{
		{"methods", &r.Methods, policy.CheckMethod, "Invalid HTTP method", "every method"},
		{"paths", &r.Paths, checkPathPattern, "Invalid path pattern", "every path"},
		{"git_push", &r.GitPush, checkRefPattern, "Invalid ref pattern", "a push to any ref"},
	}
	set := false
	for _, f := range lists {
		a := content.Attributes[f.name]
		if a == nil {
			continue
		}
		set = true
		items, good := l.attrStrings(a)
		if !good {
			ok = false
			continue
		}
		if len(items) == 0 {
			l.errorf(a.Expr.Range(), "Empty request rule list",
				"%s = [] would let nothing through, while leaving it out lets %s through. List what to allow, or remove %s from this block; to stop allowing %s, remove it from allow.",
				f.name, f.noun, f.name, p)
			ok = false
			continue
		}
		var list []string
		for _, it := range items {
			if err := f.check(it.Value); err != nil {
				l.errorf(it.Range, f.what, "%v.", err)
				ok = false
				continue
			}
			if f.name == "paths" {
				if pp, err := match.CompilePath(it.Value); err == nil {
					if why := pp.MatchesNothing(); why != "" {
						l.warnf(it.Range, "Path pattern that matches no request", "%s.", why)
					}
				}
			}
			list = append(list, it.Value)
		}
		*f.dst = sortedUnique(list)
	}
	if !set {
		l.errorf(b.DefRange, "Empty request block",
			"The request block for %s narrows nothing: give it methods, paths or git_push, or remove it.", p)
		return
	}
	if !ok {
		return
	}
	// The request block is where the rule's narrowing is written, so plans
	// and denials point there.
	r.Origin = l.origin("egress."+e.Name, b.DefRange)
	e.Allow[i] = r
}

func rulePatterns(rules []policy.AllowRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Pattern.String())
	}
	return out
}

// readCA reads an upstream CA file named by a ca entry of block. The file
// is read as file() reads: inside the configuration directory only, not
// through a link that leaves it. It must hold PEM certificates and nothing
// else (a private key in it would be copied into plans and state), at
// least one; they are kept re-encoded, so that text around the blocks
// goes nowhere.
func (l *loader) readCA(block string, it item) (policy.CA, bool) {
	data, err := l.readConfigFile(it.Value)
	if err != nil {
		l.errorf(it.Range, "Cannot read CA file", "ca names PEM files of certificate authorities, in the configuration directory: %v.", err)
		return policy.CA{}, false
	}
	var out []byte
	rest := data
	n := 0
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		n++
		if blk.Type != "CERTIFICATE" {
			l.errorf(it.Range, "Invalid CA file", "%s holds a PEM block of type %q (block %d); a CA file holds only CERTIFICATE blocks. Keep keys out of the configuration.", it.Value, blk.Type, n)
			return policy.CA{}, false
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			l.errorf(it.Range, "Invalid CA file", "Certificate %d in %s cannot be parsed: %v.", n, it.Value, err)
			return policy.CA{}, false
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})...)
	}
	if n == 0 {
		l.errorf(it.Range, "Invalid CA file", "%s holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\"); ca takes PEM files, not DER.", it.Value)
		return policy.CA{}, false
	}
	return policy.CA{
		Path:   filepath.ToSlash(filepath.Clean(it.Value)),
		PEM:    string(out),
		Origin: l.origin(block, it.Range),
	}, true
}

var secretSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "env", Required: true},
		{Name: "hosts", Required: true},
		{Name: "source"},
		{Name: "headers"},
		{Name: "plain_http"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "aws"}, {Type: "oauth"}, {Type: "file"}, {Type: "body"}, {Type: "websocket"}},
}

var secretAWSSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "services", Required: true},
		{Name: "regions", Required: true},
		{Name: "secret_key_env"},
		{Name: "session_token_env"},
	},
}

func (l *loader) decodeSecret(b *hcl.Block) {
	content, diags := b.Body.Content(secretSchema)
	l.diags = append(l.diags, diags...)
	s := &Secret{Name: b.Labels[0], DeclRange: b.DefRange}
	l.cfg.Secrets[s.Name] = s
	defer l.decodeSecretBodies(s, content.Blocks)
	defer l.decodeSecretAWS(s, content)

	if a := content.Attributes["env"]; a != nil {
		if v, ok := l.attrString(a); ok {
			if !validEnvName(v) {
				l.errorf(a.Expr.Range(), "Invalid environment variable name",
					"%q is not an environment variable name: use letters, digits and underscores, not starting with a digit.", v)
			} else {
				s.Env = v
				l.secretEnv[s.Name] = a.Expr.Range()
			}
		}
	}
	if a := content.Attributes["hosts"]; a != nil {
		items, ok := l.attrStrings(a)
		if ok && len(items) == 0 {
			l.errorf(a.Expr.Range(), "Secret has no hosts", "A secret is substituted only in requests to its hosts; name at least one.")
		}
		for _, it := range items {
			p, err := policy.ParseHostPattern(it.Value)
			if err != nil {
				l.errorf(it.Range, "Invalid host pattern", "%v.", err)
				continue
			}
			s.Hosts = append(s.Hosts, p)
		}
	}
	if a := content.Attributes["headers"]; a != nil {
		items, _ := l.attrStrings(a)
		seen := map[string]bool{}
		for _, it := range items {
			name, err := checkSecretHeader(it.Value)
			if err != nil {
				l.errorf(it.Range, "Invalid secret header", "%v.", err)
				continue
			}
			if !seen[name] {
				seen[name] = true
				s.Headers = append(s.Headers, name)
			}
		}
		sort.Strings(s.Headers)
	}
	if a := content.Attributes["plain_http"]; a != nil {
		items, _ := l.attrStrings(a)
		seen := map[policy.HostPort]bool{}
		for _, it := range items {
			hp, err := checkPlainHTTP(it.Value, s.Hosts)
			if err != nil {
				l.errorf(it.Range, "Invalid plain_http destination", "%v.", err)
				continue
			}
			if !seen[hp] {
				seen[hp] = true
				s.PlainHTTP = append(s.PlainHTTP, hp)
			}
		}
		sort.Slice(s.PlainHTTP, func(i, j int) bool { return s.PlainHTTP[i].String() < s.PlainHTTP[j].String() })
	}
	if a := content.Attributes["source"]; a != nil {
		if v, ok := l.attrString(a); ok {
			if err := policy.CheckSecretSource(v); err != nil {
				l.errorf(a.Expr.Range(), "Invalid secret source", "%v.", err)
			} else {
				s.Source = v
				if strings.HasPrefix(v, "command:") {
					l.warnf(a.Expr.Range(), "Command source is not run",
						"sbx never runs a command a spec names: whoever changes the spec could run anything on the host of whoever starts its sandboxes. "+
							"A command runs only from the user's bindings file ($SBX_BINDINGS, else $XDG_CONFIG_HOME/sbx/bindings.hcl, by default ~/.config/sbx/bindings.hcl), "+
							"where a binding \"%s\" block names it; without one, starting a sandbox that uses secret.%s fails. "+
							"Leave source out here, or name an env: or file: source.", s.Name, s.Name)
				}
			}
		}
	}
	l.decodeSecretBlocks(s, content.Blocks)
}

// decodeSecretAWS decodes a secret's aws block, which makes it an AWS
// credential re-signed on the host (policy.AWSCredential).
func (l *loader) decodeSecretAWS(s *Secret, content *hcl.BodyContent) {
	var blocks []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "aws" {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return
	}
	if len(blocks) > 1 {
		l.errorf(blocks[1].DefRange, "Duplicate aws block", "A secret is at most one AWS credential; merge the aws blocks.")
	}
	b := blocks[0]
	c, diags := b.Body.Content(secretAWSSchema)
	l.diags = append(l.diags, diags...)
	aws := &policy.AWSCredential{SecretKeyEnv: "AWS_SECRET_ACCESS_KEY", SessionTokenEnv: "AWS_SESSION_TOKEN"}
	if a := content.Attributes["headers"]; a != nil {
		l.errorf(a.Expr.Range(), "Headers on an AWS secret", "An AWS secret goes only into the Signature Version 4 signature sbx computes on the host; it is never the value of a header.")
	}
	if a := content.Attributes["plain_http"]; a != nil {
		l.errorf(a.Expr.Range(), "Plain HTTP on an AWS secret", "sbx re-signs requests with an AWS credential only over verified TLS.")
	}
	for _, f := range []struct {
		name string
		out  *[]string
		ok   func(string) bool
		want string
	}{
		{"services", &aws.Services, validAWSName, "an AWS service's signing name, such as \"s3\", \"bedrock\" or \"sts\""},
		{"regions", &aws.Regions, validAWSName, "an AWS region, such as \"us-east-1\""},
	} {
		a := c.Attributes[f.name]
		if a == nil {
			continue
		}
		items, ok := l.attrStrings(a)
		if ok && len(items) == 0 {
			l.errorf(a.Expr.Range(), "Empty "+f.name, "An AWS secret signs only for the %s it names; name at least one.", f.name)
		}
		for _, it := range items {
			if !f.ok(it.Value) {
				l.errorf(it.Range, "Invalid "+f.name, "%q is not %s.", it.Value, f.want)
				continue
			}
			if !slices.Contains(*f.out, it.Value) {
				*f.out = append(*f.out, it.Value)
			}
		}
		sort.Strings(*f.out)
	}
	for _, f := range []struct {
		name string
		out  *string
	}{{"secret_key_env", &aws.SecretKeyEnv}, {"session_token_env", &aws.SessionTokenEnv}} {
		a := c.Attributes[f.name]
		if a == nil {
			continue
		}
		if v, ok := l.attrString(a); ok {
			if !validEnvName(v) {
				l.errorf(a.Expr.Range(), "Invalid environment variable name",
					"%q is not an environment variable name: use letters, digits and underscores, not starting with a digit.", v)
				continue
			}
			*f.out = v
		}
	}
	if aws.SecretKeyEnv == s.Env || aws.SessionTokenEnv == s.Env || aws.SecretKeyEnv == aws.SessionTokenEnv {
		l.errorf(b.DefRange, "Duplicate secret environment variable",
			"secret.%s puts its access key id in %s, its secret key in %s and its session token in %s; each needs its own variable.", s.Name, s.Env, aws.SecretKeyEnv, aws.SessionTokenEnv)
	}
	s.AWS = aws
}

// validAWSName reports whether v can be an AWS signing service name or
// region: lower-case letters, digits and dashes.
func validAWSName(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// framingHeaders are headers whose value HTTP itself interprets (or that
// never reach the upstream); a credential cannot be one of them.
var framingHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"upgrade": true, "te": true, "trailer": true, "keep-alive": true, "proxy-connection": true,
	"proxy-authorization": true, "expect": true, "range": true, "if-range": true,
	"content-type": true, "content-encoding": true, "cookie": true,
}

// checkSecretHeader checks a header a secret's value may be the whole
// value of and returns it in lower case.
func checkSecretHeader(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("header name is empty")
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return "", fmt.Errorf("%q is not an HTTP header name", h)
		}
	}
	name := strings.ToLower(h)
	if framingHeaders[name] {
		return "", fmt.Errorf("%s cannot carry a secret: HTTP itself reads that header, or sbx drops or rewrites it", h)
	}
	return name, nil
}

// checkPlainHTTP parses a plain_http entry: an exact host:port whose host
// one of the secret's hosts covers. Plain HTTP is inspected on port 80
// only (port 443 takes TLS), so that is the only port it can name.
func checkPlainHTTP(s string, hosts []policy.HostPattern) (policy.HostPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok || host == "" || port == "" {
		return policy.HostPort{}, fmt.Errorf("%q must be \"host:80\", an exact host and the port the guest speaks plain HTTP to", s)
	}
	p, err := policy.ParseHostPattern(host)
	if err != nil {
		return policy.HostPort{}, fmt.Errorf("%q: %v", s, err)
	}
	if p.Wildcard {
		return policy.HostPort{}, fmt.Errorf("%q: plain HTTP is allowed only to exact hosts; name the host", s)
	}
	if port != "80" {
		return policy.HostPort{}, fmt.Errorf("%q: the guest speaks plain HTTP to port 80 only (a hosts mapping says which address that is dialled at); write %s:80", s, p.Suffix)
	}
	covered := false
	for _, h := range hosts {
		covered = covered || h.Match(p.Suffix)
	}
	if !covered {
		return policy.HostPort{}, fmt.Errorf("%q: %s is not one of the secret's hosts", s, p.Suffix)
	}
	return policy.HostPort{Host: p.Suffix, Port: 80}, nil
}

var vfsSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "mount", LabelNames: []string{"guest"}}},
}

var mountSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "host", Required: true},
		{Name: "access"},
		{Name: "hide"},
		{Name: "readonly"},
		{Name: "tmpfs"},
		{Name: "git_metadata"},
		{Name: "owner"},
	},
}

func (l *loader) decodeVFS(b *hcl.Block) {
	content, diags := b.Body.Content(vfsSchema)
	l.diags = append(l.diags, diags...)
	v := &VFS{Name: b.Labels[0], DeclRange: b.DefRange}
	l.cfg.VFS[v.Name] = v
	owners := map[string]hcl.Range{}
	l.mountOwners[v.Name] = owners
	seen := map[string]hcl.Range{}
	for _, mb := range content.Blocks {
		m, ownerRange, ok := l.decodeMount(v.Name, mb)
		if !ok {
			continue
		}
		if prev, dup := seen[m.Guest]; dup {
			l.errorf(mb.DefRange, "Duplicate mount", "vfs.%s already mounts %s at %s.", v.Name, m.Guest, rangeString(prev))
			continue
		}
		seen[m.Guest] = mb.DefRange
		if m.Owner != "" {
			owners[m.Guest] = ownerRange
		}
		v.Mounts = append(v.Mounts, m)
	}
	sort.Slice(v.Mounts, func(i, j int) bool { return v.Mounts[i].Guest < v.Mounts[j].Guest })
}

func (l *loader) decodeMount(vfs string, b *hcl.Block) (policy.Mount, hcl.Range, bool) {
	content, diags := b.Body.Content(mountSchema)
	l.diags = append(l.diags, diags...)
	m := policy.Mount{Guest: b.Labels[0], Access: policy.ReadOnly, Origin: l.origin("vfs."+vfs, b.DefRange)}
	ok := true
	if err := checkGuestPath(m.Guest); err != nil {
		l.errorf(b.LabelRanges[0], "Invalid mount path", "A mount block is labelled with the guest path it mounts at: %v.", err)
		ok = false
	} else if m.Guest == "/" {
		l.errorf(b.LabelRanges[0], "Invalid mount path", "A mount cannot replace the guest's root directory; mount at a directory such as /workspace.")
		ok = false
	}
	if a := content.Attributes["host"]; a != nil {
		if s, good := l.attrString(a); good {
			if s == "" || strings.ContainsRune(s, 0) {
				l.errorf(a.Expr.Range(), "Invalid host path", "host names a host directory, relative to the configuration directory or absolute.")
				ok = false
			} else {
				m.Host = filepath.Clean(s)
			}
		}
	}
	if a := content.Attributes["access"]; a != nil {
		if s, good := l.attrString(a); good {
			switch policy.Access(s) {
			case policy.ReadOnly, policy.ReadWrite:
				m.Access = policy.Access(s)
			default:
				l.errorf(a.Expr.Range(), "Invalid access mode", "access is \"ro\" (the default) or \"rw\", not %q.", s)
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *[]string
	}{{"hide", &m.Hide}, {"readonly", &m.ReadOnly}, {"tmpfs", &m.Tmpfs}} {
		a := content.Attributes[f.name]
		if a == nil {
			continue
		}
		items, _ := l.attrStrings(a)
		var list []string
		for _, it := range items {
			if strings.HasPrefix(it.Value, "!") {
				l.errorf(it.Range, "Invalid path pattern", "%s patterns cannot be negated with \"!\"; list the paths the rule applies to.", f.name)
				continue
			}
			// The file server compiles these with the same function.
			if _, err := match.CompileMount(it.Value); err != nil {
				l.errorf(it.Range, "Invalid path pattern", "%s patterns are relative to the mount's root: %v.", f.name, err)
				continue
			}
			list = append(list, it.Value)
		}
		*f.dst = sortedUnique(list)
	}
	if a := content.Attributes["git_metadata"]; a != nil {
		if s, good := l.attrString(a); good {
			switch s {
			case "protected":
			case "writable":
				m.GitWritable = true
			default:
				l.errorf(a.Expr.Range(), "Invalid git_metadata", "git_metadata is \"protected\" (the default: the guest cannot write what git on the host reads as configuration, hooks or redirection) or \"writable\", not %q.", s)
			}
		}
	}
	var ownerRange hcl.Range
	if a := content.Attributes["owner"]; a != nil {
		if s, good := l.attrString(a); good {
			if s != "root" && !validUserName(s) {
				l.errorf(a.Expr.Range(), "Invalid user name", "%q is not a valid user name.", s)
			} else {
				m.Owner = s
				ownerRange = a.Expr.Range()
			}
		}
	}
	return m, ownerRange, ok
}

// sortedUnique sorts and dedupes a list; an empty list becomes nil.
func sortedUnique(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	sort.Strings(list)
	out := list[:1]
	for _, s := range list[1:] {
		if s != out[len(out)-1] {
			out = append(out, s)
		}
	}
	return out
}

// checkPathPattern and checkRefPattern validate request rule patterns
// with the compiler the egress engine uses.
func checkPathPattern(p string) error {
	_, err := match.CompilePath(p)
	return err
}

func checkRefPattern(p string) error {
	_, err := match.CompileRef(p)
	return err
}
