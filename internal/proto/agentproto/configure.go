package agentproto

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
)

// Configure sets up the guest's side of the sandbox's network, trust and
// environment. The host sends it once it has taken over the agent, before
// any exec of its client's; it may send it again, and the later request
// replaces what the earlier one set (the network, the CA and the
// environment defaults alike). The guest answers with TypeResult.
type Configure struct {
	// Net configures one interface, its address and the default route,
	// and /etc/resolv.conf; nil leaves networking as it is (down, after
	// boot).
	Net *NetConfig `json:"net,omitempty"`
	// CACertPEM holds the certificates, PEM-encoded, of the CA the guest
	// must trust: the host's interception CA. It is public; its key
	// never leaves the host. The guest adds it to its system bundle
	// (CABundlePath) and points the usual variables at it (CAEnv).
	// Empty means no CA: one an earlier request added is taken out.
	CACertPEM []byte `json:"ca_cert_pem,omitempty"`
	// Env holds "KEY=value" entries every exec gets as defaults (an
	// exec's own Env still overrides them): the placeholders of the
	// brokered secrets, never their values.
	Env []string `json:"env,omitempty"`
	// Hosts are extra /etc/hosts lines, "ADDRESS NAME [NAME...]".
	Hosts []string `json:"hosts,omitempty"`
	// Mounts are the sandbox's workspace mounts: each a file system the
	// host serves over 9P on a virtio-serial port of its own. The guest
	// mounts each once; a later request naming a path already mounted
	// from the same port leaves it as it is.
	Mounts []Mount `json:"mounts,omitempty"`
	// Identity is what makes this guest its own: its name, clock and
	// entropy. A guest resumed from a saved machine has the saved one's
	// until it is told; a guest that announced CapIdentity applies it
	// first. nil leaves them as they are.
	Identity *Identity `json:"identity,omitempty"`
}

// Identity is what must differ between guests resumed from one saved
// machine, and be right after a resume.
type Identity struct {
	// Hostname is the guest's host name (the kernel's, and /etc/hosts'
	// line for it); empty leaves it.
	Hostname string `json:"hostname,omitempty"`
	// TimeUnixNano is the host's clock, in nanoseconds since the Unix
	// epoch, when the request was made: the guest sets its clock to it.
	// Zero leaves the clock.
	TimeUnixNano int64 `json:"time_unix_nano,omitempty"`
	// Entropy is fresh random bytes from the host, which the guest mixes
	// into its kernel's random pool, crediting them, and then reseeds
	// the pool's generator: a resumed guest's random numbers are not the
	// saved one's. At most MaxEntropy bytes.
	Entropy []byte `json:"entropy,omitempty"`
}

// MaxEntropy is the most bytes of Identity.Entropy.
const MaxEntropy = 512

// Mount is one workspace mount the guest makes, served on a
// virtio-serial port (Port, 9P) or by a virtio-fs device (Tag): one of
// the two.
type Mount struct {
	// Port is the name of the virtio-serial port the host serves it on
	// over 9P, "sbx.vfs.N".
	Port string `json:"port,omitempty"`
	// Tag is the tag of the virtio-fs device the host serves it by,
	// "sbx-fs-N" (machine.Machine.AddFS adds the device).
	Tag string `json:"tag,omitempty"`
	// Path is where it is mounted: absolute, clean, not "/".
	Path string `json:"path"`
	// ReadOnly mounts it read-only in the guest too (the host refuses
	// writes to it either way).
	ReadOnly bool `json:"read_only,omitempty"`
}

// MountPortPrefix begins the port name of every Mount served over 9P,
// MountTagPrefix the tag of every one served by a virtio-fs device.
const (
	MountPortPrefix = "sbx.vfs."
	MountTagPrefix  = "sbx-fs-"
)

// MountTag is the tag of mount i's virtio-fs device.
func MountTag(i int) string { return MountTagPrefix + strconv.Itoa(i) }

// Source names where the mount comes from: its port or its tag.
func (m Mount) Source() string {
	if m.Tag != "" {
		return m.Tag
	}
	return m.Port
}

// numbered reports whether s is prefix followed by a decimal number.
func numbered(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && rest != "" && len(s) <= 64 && !strings.ContainsFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
}

// Validate checks a mount: a port or a tag of the mounts' own (not
// both) and a path that is absolute, clean and not the root.
func (m Mount) Validate() error {
	switch {
	case m.Port != "" && m.Tag != "":
		return fmt.Errorf("configure: mount %q has both a port and a tag", m.Path)
	case m.Tag != "":
		if !numbered(m.Tag, MountTagPrefix) {
			return fmt.Errorf("configure: mount tag %q is not %sN", m.Tag, MountTagPrefix)
		}
	case !numbered(m.Port, MountPortPrefix):
		return fmt.Errorf("configure: mount port %q is not %sN", m.Port, MountPortPrefix)
	}
	if !path.IsAbs(m.Path) || path.Clean(m.Path) != m.Path || m.Path == "/" || len(m.Path) > 4096 || strings.ContainsRune(m.Path, 0) {
		return fmt.Errorf("configure: mount path %q must be absolute, clean and not /", m.Path)
	}
	return nil
}

// NetConfig is the static configuration of the guest's network
// interface: the sandbox network has no DHCP server.
type NetConfig struct {
	// Interface names the interface: its name ("eth0") or its MAC
	// address ("52:54:00:12:34:56"), which does not depend on the
	// order in which the guest's kernel found its devices.
	Interface string `json:"interface"`
	// Addr is the interface's address with the network's prefix
	// length, "10.83.0.2/24".
	Addr string `json:"addr"`
	// Gateway is the default route's next hop, inside Addr's network;
	// empty means no default route.
	Gateway string `json:"gateway,omitempty"`
	// DNS is the resolver /etc/resolv.conf names; empty leaves the
	// file alone.
	DNS string `json:"dns,omitempty"`
	// MTU is the interface's MTU; zero leaves the driver's.
	MTU int `json:"mtu,omitempty"`
}

// Where the guest keeps the CA, and the variables that point clients at
// it.
const (
	// CACertPath holds Configure.CACertPEM alone.
	CACertPath = "/etc/sbx/ca.crt"
	// CABundlePath is the system bundle (Debian's path, which OpenSSL,
	// GnuTLS and Go read on Debian-like systems): the image's roots
	// plus the sandbox CA.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// CAEnv returns the variables that point the usual clients (OpenSSL,
// curl, Python requests, git, Node.js) at the CA: "KEY=value" entries
// every exec gets while the guest trusts a CA. Node.js adds its one
// file to its own roots; the others replace theirs, so they name the
// whole bundle.
func CAEnv() []string {
	return []string{
		"SSL_CERT_FILE=" + CABundlePath,
		"CURL_CA_BUNDLE=" + CABundlePath,
		"REQUESTS_CA_BUNDLE=" + CABundlePath,
		"GIT_SSL_CAINFO=" + CABundlePath,
		"NODE_EXTRA_CA_CERTS=" + CACertPath,
	}
}

// Limits of a Configure, far above any real sandbox's and far below what
// would let a request use the guest's memory or files up.
const (
	MaxConfigureEnv   = 1024
	MaxConfigureHosts = 1024
	// MaxConfigureMounts is what fits on the machine's virtio-serial
	// device beside the agent's own ports.
	MaxConfigureMounts = 29
	MaxCACertPEM       = 256 << 10
)

// Validate checks a Configure before it is sent or applied: every field
// well-formed, so the guest never writes half a configuration or a
// malformed line into a file. Its errors name the field.
func (c *Configure) Validate() error {
	if c.Net != nil {
		if err := c.Net.Validate(); err != nil {
			return err
		}
	}
	if len(c.CACertPEM) > 0 {
		if _, err := ParseCACerts(c.CACertPEM); err != nil {
			return err
		}
	}
	if len(c.Env) > MaxConfigureEnv {
		return fmt.Errorf("configure: %d env entries (maximum %d)", len(c.Env), MaxConfigureEnv)
	}
	for _, kv := range c.Env {
		if err := checkEnv(kv); err != nil {
			return err
		}
	}
	if len(c.Hosts) > MaxConfigureHosts {
		return fmt.Errorf("configure: %d hosts lines (maximum %d)", len(c.Hosts), MaxConfigureHosts)
	}
	for _, line := range c.Hosts {
		if err := checkHostsLine(line); err != nil {
			return err
		}
	}
	if len(c.Mounts) > MaxConfigureMounts {
		return fmt.Errorf("configure: %d mounts (maximum %d)", len(c.Mounts), MaxConfigureMounts)
	}
	if id := c.Identity; id != nil {
		if len(id.Entropy) > MaxEntropy {
			return fmt.Errorf("configure: %d bytes of entropy (maximum %d)", len(id.Entropy), MaxEntropy)
		}
		if id.Hostname != "" {
			if err := checkHostname(id.Hostname); err != nil {
				return err
			}
		}
		if id.TimeUnixNano < 0 {
			return fmt.Errorf("configure: a clock before 1970")
		}
	}
	seen := map[string]bool{}
	for _, m := range c.Mounts {
		if err := m.Validate(); err != nil {
			return err
		}
		if seen[m.Path] {
			return fmt.Errorf("configure: two mounts at %s", m.Path)
		}
		seen[m.Path] = true
	}
	return nil
}

func checkEnv(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("configure: env entry %q is not KEY=value", kv)
	}
	if !isEnvName(k) {
		return fmt.Errorf("configure: env entry %q: the name must be letters, digits and _, not starting with a digit", kv)
	}
	if strings.ContainsRune(v, 0) {
		return fmt.Errorf("configure: env entry %s holds a NUL byte", k)
	}
	return nil
}

func isEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func checkHostsLine(line string) error {
	if strings.ContainsAny(line, "\n\r\x00#") {
		return fmt.Errorf("configure: hosts line %q holds a line break, a NUL or a comment", line)
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return fmt.Errorf("configure: hosts line %q is not ADDRESS NAME [NAME...]", line)
	}
	if _, err := netip.ParseAddr(f[0]); err != nil {
		return fmt.Errorf("configure: hosts line %q: %q is not an IP address", line, f[0])
	}
	for _, name := range f[1:] {
		if !isHostname(name) {
			return fmt.Errorf("configure: hosts line %q: %q is not a host name", line, name)
		}
	}
	return nil
}

func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
				return false
			}
		}
	}
	return true
}

// Validate checks a NetConfig: an interface named, an address with its
// prefix, a gateway inside its network, a resolver and an MTU that the
// kernel would take.
func (n *NetConfig) Validate() error {
	if err := checkInterface(n.Interface); err != nil {
		return err
	}
	p, err := n.Prefix()
	if err != nil {
		return err
	}
	if n.Gateway != "" {
		gw, err := netip.ParseAddr(n.Gateway)
		if err != nil {
			return fmt.Errorf("configure: net gateway %q is not an IP address", n.Gateway)
		}
		if gw.Is4() != p.Addr().Is4() || !p.Masked().Contains(gw) || gw == p.Addr() {
			return fmt.Errorf("configure: net gateway %s is not another address of %s's network %s", gw, p.Addr(), p.Masked())
		}
	}
	if n.DNS != "" {
		if _, err := netip.ParseAddr(n.DNS); err != nil {
			return fmt.Errorf("configure: net dns %q is not an IP address", n.DNS)
		}
	}
	minMTU := 68
	if p.Addr().Is6() {
		minMTU = 1280
	}
	if n.MTU != 0 && (n.MTU < minMTU || n.MTU > 65535) {
		return fmt.Errorf("configure: net mtu %d is out of range (%d to 65535)", n.MTU, minMTU)
	}
	return nil
}

// Prefix returns Addr parsed: a unicast address that is neither loopback
// nor unspecified, with a prefix length that leaves room for a network.
func (n *NetConfig) Prefix() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(n.Addr)
	if err != nil {
		return p, fmt.Errorf("configure: net addr %q is not ADDRESS/PREFIX-LENGTH", n.Addr)
	}
	a := p.Addr()
	if a.Zone() != "" || a.Is4In6() || !a.IsGlobalUnicast() || p.Bits() == 0 {
		return p, fmt.Errorf("configure: net addr %s is not a unicast address on a network", n.Addr)
	}
	return p, nil
}

// InterfaceMAC returns the MAC address Interface names, or nil when it
// names the interface by name.
func (n *NetConfig) InterfaceMAC() net.HardwareAddr {
	if strings.Count(n.Interface, ":") != 5 {
		return nil
	}
	mac, err := net.ParseMAC(n.Interface)
	if err != nil {
		return nil
	}
	return mac
}

func checkInterface(s string) error {
	if strings.Count(s, ":") == 5 {
		if mac, err := net.ParseMAC(s); err != nil || len(mac) != 6 {
			return fmt.Errorf("configure: net interface %q is not a MAC address", s)
		}
		return nil
	}
	// The kernel's rule for interface names (dev_valid_name).
	if s == "" || len(s) > 15 || s == "." || s == ".." || strings.ContainsAny(s, "/:\x00") || strings.ContainsFunc(s, isSpace) {
		return fmt.Errorf("configure: net interface %q is neither an interface name nor a MAC address", s)
	}
	return nil
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// ParseCACerts reads Configure.CACertPEM: one or more CERTIFICATE blocks
// of CA certificates and nothing else but white space. It returns them
// re-encoded, each block in the canonical PEM form, so that the same
// certificates always give the same bytes (which is how the guest finds
// them again in its bundle).
func ParseCACerts(p []byte) ([]byte, error) {
	if len(p) > MaxCACertPEM {
		return nil, fmt.Errorf("configure: the CA certificate is %d bytes (maximum %d)", len(p), MaxCACertPEM)
	}
	var out []byte
	rest := p
	for n := 1; ; n++ {
		// pem.Decode skips text before a block: refuse it instead.
		rest = bytes.TrimLeft(rest, " \t\r\n")
		if len(rest) == 0 {
			break
		}
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return nil, errors.New("configure: the CA certificate holds something that is not a PEM CERTIFICATE block")
		}
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("configure: the CA's PEM block %d is malformed", n)
		}
		if b.Type != "CERTIFICATE" || len(b.Headers) > 0 {
			return nil, fmt.Errorf("configure: the CA's PEM block %d is a %q, not a CERTIFICATE", n, b.Type)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("configure: the CA's certificate %d: %w", n, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("configure: certificate %d (%s) is not a CA certificate", n, cert.Subject)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
	}
	if len(out) == 0 {
		return nil, errors.New("configure: the CA certificate holds no PEM CERTIFICATE block")
	}
	return out, nil
}

// checkHostname checks a host name as the kernel takes it: 1 to 64
// letters, digits, dashes and dots, not beginning with a dash or dot.
func checkHostname(name string) error {
	if len(name) == 0 || len(name) > 64 || name[0] == '-' || name[0] == '.' {
		return fmt.Errorf("configure: host name %q: 1 to 64 characters, not beginning with '-' or '.'", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("configure: host name %q: letters, digits, '-' and '.' only", name)
		}
	}
	return nil
}
