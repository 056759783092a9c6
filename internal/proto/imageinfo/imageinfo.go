package imageinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Paths in the guest's root filesystem.
const (
	// Path is the image description the agent reads at boot.
	Path = "/etc/sbx/image.json"
	// Dir holds sbx's own files in the guest.
	Dir = "/etc/sbx"
	// CACertPath is where the agent installs, at boot, the per-install CA
	// certificate the host's TLS interception signs with. The image only
	// reserves the place: the certificate itself is never built into an
	// image, so that one image serves every install.
	CACertPath = "/etc/sbx/ca.crt"
	// CertsDir is the system certificate directory; the builder makes sure
	// it exists so that the agent can add the CA to the system bundle.
	CertsDir = "/etc/ssl/certs"
)

// Guest network addressing on the one virtio-net link, whose other end is
// the host's userspace network stack. The addresses are fixed: every
// sandbox has a network of its own, so they never clash.
const (
	// GuestAddress is the guest's address and prefix on eth0.
	// The host's stack (package egress/netstack) serves these; a test
	// there holds the two to the same values.
	GuestAddress = "10.83.0.2/24"
	// GuestIP is GuestAddress without its prefix length.
	GuestIP = "10.83.0.2"
	// Gateway is the host stack's address and the guest's default route.
	Gateway = "10.83.0.1"
	// DNS is the resolver the host stack answers on (port 53, UDP and
	// TCP); the image's /etc/resolv.conf names it.
	DNS = "10.83.0.1"
	// MTU is the link's MTU.
	MTU = 1500
)

// Version is the version of the Info document this package writes.
const Version = 1

// Info is the image description at Path.
type Info struct {
	// Version is the document's version, Version.
	Version int `json:"version"`
	// Name is the image block's name in the spec.
	Name string `json:"name"`
	// Platform is the image's OCI platform, "linux/amd64".
	Platform string `json:"platform"`
	// InputHash is the recipe input hash the image was built from
	// ("sha256:…"); empty when the builder was not given one.
	InputHash string `json:"inputHash,omitempty"`
	// Hostname is the image's host name, also in /etc/hostname.
	Hostname string `json:"hostname"`
	// Env is the environment for every process the agent starts: the
	// base image's configured environment overridden by the spec's env.
	Env map[string]string `json:"env,omitempty"`
	// Users are the accounts the spec declares (root is always there and
	// not listed), in the order the builder created them.
	Users []User `json:"users,omitempty"`
	// Network is the guest's addressing.
	Network Network `json:"network"`
	// CACert is where the agent installs the per-install CA
	// (CACertPath).
	CACert string `json:"caCert"`
	// Packages are the packages sbx installed from the image's package
	// set, sorted by name; Executables the executables the build checked.
	Packages    []Package    `json:"packages,omitempty"`
	Executables []Executable `json:"executables,omitempty"`
}

// Package is one installed package.
type Package struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Architecture string `json:"architecture"`
}

// Executable is a command the build found and checked, and the path it
// was found at.
type Executable struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// User is an account the spec declares.
type User struct {
	Name  string `json:"name"`
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	Home  string `json:"home"`
	Shell string `json:"shell"`
	// Groups are the supplementary groups, as declared.
	Groups []string `json:"groups,omitempty"`
}

// Network is the guest's addressing on eth0.
type Network struct {
	Address string   `json:"address"` // with prefix length, GuestAddress
	Gateway string   `json:"gateway"`
	DNS     []string `json:"dns"`
	MTU     int      `json:"mtu"`
}

// DefaultNetwork is the addressing every image carries.
func DefaultNetwork() Network {
	return Network{Address: GuestAddress, Gateway: Gateway, DNS: []string{DNS}, MTU: MTU}
}

// Encode returns info as indented JSON ending in a newline. Map keys are
// sorted, so equal values encode to equal bytes.
func Encode(info *Info) ([]byte, error) {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", Path, err)
	}
	return append(b, '\n'), nil
}

// Parse decodes an image description. Unknown fields are errors, and so is
// a version other than Version: an agent must not guess at a document it
// does not understand.
func Parse(data []byte) (*Info, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var info Info
	if err := dec.Decode(&info); err != nil {
		return nil, fmt.Errorf("%s: %w", Path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the JSON document", Path)
	}
	if info.Version != Version {
		return nil, fmt.Errorf("%s: version %d, want %d", Path, info.Version, Version)
	}
	return &info, nil
}
