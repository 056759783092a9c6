package lang

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

var egressSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "allow"},
		{Name: "tcp"},
		{Name: "hosts"},
	},
}

func (l *loader) decodeEgress(b *hcl.Block) {
	content, diags := b.Body.Content(egressSchema)
	l.diags = append(l.diags, diags...)
	e := &Egress{Name: b.Labels[0], DeclRange: b.DefRange}
	l.cfg.Egress[e.Name] = e
	block := "egress." + e.Name

	if a := content.Attributes["allow"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			p, err := policy.ParseHostPattern(it.Value)
			if err != nil {
				l.errorf(it.Range, "Invalid host pattern", "%v.", err)
				continue
			}
			e.Allow = append(e.Allow, policy.AllowRule{Pattern: p, Origin: l.origin(block, it.Range)})
		}
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
}

var secretSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "env", Required: true},
		{Name: "hosts", Required: true},
		{Name: "source", Required: true},
	},
}

func (l *loader) decodeSecret(b *hcl.Block) {
	content, diags := b.Body.Content(secretSchema)
	l.diags = append(l.diags, diags...)
	s := &Secret{Name: b.Labels[0], DeclRange: b.DefRange}
	l.cfg.Secrets[s.Name] = s

	if a := content.Attributes["env"]; a != nil {
		if v, ok := l.attrString(a); ok {
			if !validEnvName(v) {
				l.errorf(a.Expr.Range(), "Invalid environment variable name",
					"%q is not an environment variable name: use letters, digits and underscores, not starting with a digit.", v)
			} else {
				s.Env = v
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
	if a := content.Attributes["source"]; a != nil {
		if v, ok := l.attrString(a); ok {
			if err := checkSecretSource(v); err != nil {
				l.errorf(a.Expr.Range(), "Invalid secret source", "%v.", err)
			} else {
				s.Source = v
			}
		}
	}
}

// checkSecretSource checks where the host reads a secret: env:NAME,
// file:PATH or command:CMD. The value itself is never read here.
func checkSecretSource(s string) error {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("source %q must be env:NAME, file:PATH or command:COMMAND", s)
	}
	switch kind {
	case "env":
		if !validEnvName(rest) {
			return fmt.Errorf("source %q: %q is not an environment variable name", s, rest)
		}
	case "file":
		if rest == "" {
			return fmt.Errorf("source %q names no file", s)
		}
	case "command":
		if strings.TrimSpace(rest) == "" {
			return fmt.Errorf("source %q names no command", s)
		}
	default:
		return fmt.Errorf("source %q: unknown kind %q; use env:NAME, file:PATH or command:COMMAND", s, kind)
	}
	return nil
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
			if err := checkRelPattern(it.Value); err != nil {
				l.errorf(it.Range, "Invalid path pattern", "%s patterns are relative to the mount's root: %v.", f.name, err)
				continue
			}
			list = append(list, it.Value)
		}
		*f.dst = sortedUnique(list)
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
