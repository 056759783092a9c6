package operation

import (
	"fmt"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// PinIdentity is the part of a pin that says which bytes it means, as
// shown to people: a version and a digest. A Debian package's version is
// shown as PACKAGE=VERSION, with the package its file name records: for
// a kernel named by its meta package, the package the lock followed it
// to.
func PinIdentity(p *lockfiles.Pin) string {
	var parts []string
	if p.Version != "" {
		v := p.Version
		if pkg, _, ok := strings.Cut(p.Filename, "_"); ok && p.Kind == "deb" && pkg != "" {
			v = pkg + "=" + v
		}
		parts = append(parts, v)
	}
	switch {
	case p.Digest != "":
		parts = append(parts, p.Digest)
		if p.Manifest != "" && p.Manifest != p.Digest {
			parts = append(parts, "manifest "+p.Manifest)
		}
	case p.Integrity != "":
		parts = append(parts, p.Integrity)
	case p.SHA256 != "":
		parts = append(parts, "sha256:"+p.SHA256)
	}
	return strings.Join(parts, " ")
}

// LockChangeLine renders one lock change:
//
//   - image.agent artifact.claude: npm:…@2.1.332 → 2.1.332 sha512-…
//     ~ image.agent base: alpine:3.23 sha256:aaa… → sha256:bbb…
//   - image.agent artifact.moltnet: removed
func LockChangeLine(c resolve.LockChange) string {
	key := c.Key
	if key == "" {
		key = "(image)"
	}
	head := fmt.Sprintf("image.%s %s", c.Image, key)
	switch {
	case c.Old == nil && c.New != nil:
		return fmt.Sprintf("+ %s: %s → %s", head, c.New.Source, PinIdentity(c.New))
	case c.Old != nil && c.New == nil:
		return fmt.Sprintf("- %s: %s removed", head, c.Old.Source)
	case c.Old != nil && c.New != nil:
		if c.Old.Source != c.New.Source {
			return fmt.Sprintf("~ %s: %s %s → %s %s", head, c.Old.Source, PinIdentity(c.Old), c.New.Source, PinIdentity(c.New))
		}
		return fmt.Sprintf("~ %s: %s %s → %s", head, c.New.Source, PinIdentity(c.Old), PinIdentity(c.New))
	}
	return "  " + head
}
