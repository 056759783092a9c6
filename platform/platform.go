package platform

import (
	"fmt"
	"strings"
)

// Platform is an OCI platform, e.g. linux/amd64 or linux/arm64/v8.
type Platform struct {
	OS           string
	Architecture string
	Variant      string
}

// String returns the platform as OS/ARCH or OS/ARCH/VARIANT.
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Parse parses an OCI platform "os/arch[/variant]". Images boot as
// Linux guests, so the OS must be linux.
func Parse(s string) (Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return Platform{}, fmt.Errorf("platform %q must be os/arch or os/arch/variant, as in \"linux/amd64\" or \"linux/arm64/v8\"", s)
	}
	p := Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
		if p.Variant == "" || !lowerAlnum(p.Variant) {
			return Platform{}, fmt.Errorf("platform %q has an invalid variant %q", s, p.Variant)
		}
	}
	if p.OS != "linux" {
		return Platform{}, fmt.Errorf("platform %q: images are Linux guests, so the OS must be linux", s)
	}
	switch p.Architecture {
	case "amd64", "arm64", "arm", "386", "riscv64", "ppc64le", "s390x":
	default:
		return Platform{}, fmt.Errorf("platform %q: unknown architecture %q (amd64, arm64, arm, 386, riscv64, ppc64le or s390x)", s, p.Architecture)
	}
	return p, nil
}

func lowerAlnum(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
