package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// HostPattern matches DNS host names. It is either an exact name
// ("api.anthropic.com") or an explicit wildcard over the subdomains of a
// suffix ("*.openai.com", which matches "api.openai.com" and
// "a.b.openai.com" but not "openai.com" itself). Names are lower case,
// without a trailing dot.
type HostPattern struct {
	// Suffix is the name for an exact pattern, or the part after "*." for
	// a wildcard.
	Suffix   string
	Wildcard bool
}

// ParseHostPattern parses and validates a host pattern as written in a spec.
// IP addresses, ports, schemes, paths, a bare "*" and wildcards anywhere but
// the leftmost label are errors: a pattern names hosts, explicitly.
func ParseHostPattern(s string) (HostPattern, error) {
	if s == "" {
		return HostPattern{}, fmt.Errorf("empty host pattern")
	}
	if strings.Contains(s, "://") {
		return HostPattern{}, fmt.Errorf("host pattern %q has a scheme; write the host name only", s)
	}
	if strings.ContainsAny(s, "/?#@ ") {
		return HostPattern{}, fmt.Errorf("host pattern %q must be a host name, not a URL", s)
	}
	if strings.Contains(s, ":") {
		if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
			return HostPattern{}, fmt.Errorf("host pattern %q is an IP address; name hosts, or pin a name to an address with hosts = {...}", s)
		}
		return HostPattern{}, fmt.Errorf("host pattern %q has a port; allow takes host names (HTTP and HTTPS), use tcp = [\"host:port\"] for raw TCP", s)
	}
	p := HostPattern{Suffix: strings.ToLower(strings.TrimSuffix(s, "."))}
	if p.Suffix == "*" {
		return HostPattern{}, fmt.Errorf("host pattern %q allows every host; list the hosts the sandbox needs", s)
	}
	if rest, ok := strings.CutPrefix(p.Suffix, "*."); ok {
		p.Wildcard = true
		p.Suffix = rest
	}
	if strings.Contains(p.Suffix, "*") {
		return HostPattern{}, fmt.Errorf("host pattern %q: a wildcard may only be the whole leftmost label, as in \"*.example.com\"", s)
	}
	if _, err := netip.ParseAddr(p.Suffix); err == nil {
		return HostPattern{}, fmt.Errorf("host pattern %q is an IP address; name hosts, or pin a name to an address with hosts = {...}", s)
	}
	if err := checkHostName(p.Suffix); err != nil {
		return HostPattern{}, fmt.Errorf("host pattern %q: %v", s, err)
	}
	if p.Wildcard && !strings.Contains(p.Suffix, ".") {
		return HostPattern{}, fmt.Errorf("host pattern %q covers a whole top-level domain; name a registered domain, as in \"*.example.com\"", s)
	}
	return p, nil
}

// MustHostPattern is ParseHostPattern for literals in tests and tables; it
// panics on error.
func MustHostPattern(s string) HostPattern {
	p, err := ParseHostPattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

func checkHostName(name string) error {
	if len(name) > 253 {
		return fmt.Errorf("name longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return fmt.Errorf("empty label")
		}
		if len(label) > 63 {
			return fmt.Errorf("label %q longer than 63 characters", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q has invalid character %q", label, c)
			}
		}
	}
	return nil
}

func (p HostPattern) String() string {
	if p.Wildcard {
		return "*." + p.Suffix
	}
	return p.Suffix
}

// Match reports whether host (any case, optional trailing dot) is matched.
func (p HostPattern) Match(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !p.Wildcard {
		return host == p.Suffix
	}
	return strings.HasSuffix(host, "."+p.Suffix)
}

// Covers reports whether every host q matches is also matched by p.
func (p HostPattern) Covers(q HostPattern) bool {
	if !p.Wildcard {
		return !q.Wildcard && p.Suffix == q.Suffix
	}
	if q.Wildcard {
		return q.Suffix == p.Suffix || strings.HasSuffix(q.Suffix, "."+p.Suffix)
	}
	return p.Match(q.Suffix)
}

// HostPort is a raw TCP destination: an exact host name and a port.
type HostPort struct {
	Host string
	Port uint16
}

// ParseHostPort parses "host:port" for tcp rules. The host must be a name,
// not an address and not a wildcard.
func ParseHostPort(s string) (HostPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok || host == "" || port == "" {
		return HostPort{}, fmt.Errorf("tcp destination %q must be \"host:port\"", s)
	}
	p, err := ParseHostPattern(host)
	if err != nil {
		return HostPort{}, fmt.Errorf("tcp destination %q: %v", s, err)
	}
	if p.Wildcard {
		return HostPort{}, fmt.Errorf("tcp destination %q: wildcards are not allowed for raw TCP; name the host", s)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return HostPort{}, fmt.Errorf("tcp destination %q: port %q is not a number from 1 to 65535", s, port)
	}
	return HostPort{Host: p.Suffix, Port: uint16(n)}, nil
}

func (h HostPort) String() string { return h.Host + ":" + strconv.Itoa(int(h.Port)) }

// MarshalText renders the pattern as written in specs.
func (p HostPattern) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses a pattern with ParseHostPattern.
func (p *HostPattern) UnmarshalText(b []byte) error {
	q, err := ParseHostPattern(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// MarshalText renders "host:port".
func (h HostPort) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText parses "host:port" with ParseHostPort.
func (h *HostPort) UnmarshalText(b []byte) error {
	q, err := ParseHostPort(string(b))
	if err != nil {
		return err
	}
	*h = q
	return nil
}
