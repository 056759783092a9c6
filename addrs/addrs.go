package addrs

import (
	"fmt"
	"strings"
)

// Kind is the block type an address points at.
type Kind string

// The kinds of addressable blocks.
const (
	Image    Kind = "image"
	Sandbox  Kind = "sandbox"
	Egress   Kind = "egress"
	Secret   Kind = "secret"
	VFS      Kind = "vfs"
	Variable Kind = "var"
	Local    Kind = "local"
	Output   Kind = "output"
)

// Managed reports whether things of this kind materialize (appear in state
// and in plans). Only images and sandboxes do; the rest are configuration
// that sandboxes use.
func (k Kind) Managed() bool { return k == Image || k == Sandbox }

// Ref is the address of one named block, e.g. image.agent.
type Ref struct {
	Kind Kind
	Name string
}

// ImageRef returns the address image.NAME.
func ImageRef(name string) Ref { return Ref{Kind: Image, Name: name} }

// SandboxRef returns the address sandbox.NAME.
func SandboxRef(name string) Ref { return Ref{Kind: Sandbox, Name: name} }

func (r Ref) String() string { return string(r.Kind) + "." + r.Name }

// Less orders addresses the way plans and state list them: images before
// sandboxes (the order they are applied in), then by name.
func (r Ref) Less(o Ref) bool {
	if r.Kind != o.Kind {
		return kindOrder(r.Kind) < kindOrder(o.Kind)
	}
	return r.Name < o.Name
}

func kindOrder(k Kind) int {
	switch k {
	case Variable:
		return 0
	case Local:
		return 1
	case Image:
		return 2
	case Egress:
		return 3
	case Secret:
		return 4
	case VFS:
		return 5
	case Sandbox:
		return 6
	case Output:
		return 7
	}
	return 8
}

// ParseRef parses "kind.name". It is used for CLI arguments and state files;
// references inside HCL expressions are traversals checked by package lang.
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, ".")
	if !ok || name == "" {
		return Ref{}, fmt.Errorf("invalid address %q: want KIND.NAME, e.g. sandbox.eval", s)
	}
	k := Kind(kind)
	switch k {
	case Image, Sandbox, Egress, Secret, VFS, Variable, Local, Output:
	default:
		return Ref{}, fmt.Errorf("invalid address %q: unknown kind %q", s, kind)
	}
	if !ValidName(name) {
		return Ref{}, fmt.Errorf("invalid address %q: %q is not a valid name", s, name)
	}
	return Ref{Kind: k, Name: name}, nil
}

// ValidName reports whether s is a valid block name: a letter or underscore
// followed by letters, digits, underscores or dashes (HCL identifier rules).
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case i > 0 && (c == '-' || (c >= '0' && c <= '9')):
		default:
			return false
		}
	}
	return true
}
