package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// Mounts returns the workspace mounts of sandbox sb of cfg as a started
// sandbox serves them, in the policy's order: the host directory made
// absolute against the configuration directory, the owner's name turned
// into the uid and gid of that user of the sandbox's image (the
// sandbox's user when the mount names none).
func Mounts(cfg *lang.Config, sb *lang.Sandbox) ([]sandboxfs.Mount, error) {
	img := cfg.Images[sb.Image]
	var out []sandboxfs.Mount
	for _, m := range sb.Policy.Mounts {
		owner := m.Owner
		if owner == "" {
			owner = sb.User
		}
		uid, gid, err := userIDs(img, owner)
		if err != nil {
			return nil, fmt.Errorf("mount %s%s: %w", m.Guest, origin(m.Origin), err)
		}
		host, err := hostDir(cfg.Dir, m.Host)
		if err != nil {
			return nil, fmt.Errorf("mount %s%s: %w", m.Guest, origin(m.Origin), err)
		}
		out = append(out, sandboxfs.Mount{Policy: m, HostDir: host, UID: uid, GID: gid})
	}
	return out, nil
}

// hostDir returns a mount's host directory, absolute. A directory the
// spec names inside the configuration directory must stay there: one
// that a symbolic link in the checkout leads out of is refused (a checkout
// could otherwise point the guest at ~/.ssh), while a path the spec
// writes as absolute or with ".." is taken as the user's explicit choice,
// as lang's host_paths are. A directory that does not exist is left for
// Open to report.
func hostDir(configDir, host string) (string, error) {
	if filepath.IsAbs(host) {
		return filepath.Clean(host), nil
	}
	if host == ".." || strings.HasPrefix(host, "../") {
		return filepath.Abs(filepath.Join(configDir, host))
	}
	dir, err := filepath.Abs(filepath.Join(configDir, host))
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return dir, nil
	}
	base, err := filepath.EvalSymlinks(configDir)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(base, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("host directory %q leads outside the configuration directory through a symbolic link; write the directory's own path in the spec to mount it", host)
	}
	return real, nil
}

// userIDs returns the uid and gid of user name of img; "" and "root"
// are root.
func userIDs(img *lang.Image, name string) (uint32, uint32, error) {
	if name == "" || name == "root" {
		return 0, 0, nil
	}
	if img != nil {
		for _, u := range img.Users {
			if u.Name == name {
				return uint32(u.UID), uint32(u.GID), nil
			}
		}
	}
	return 0, 0, fmt.Errorf("owner %q is not a user of the sandbox's image", name)
}

// origin is " (file:line)" of o, or nothing when o has no file.
func origin(o policy.Origin) string {
	if o.File == "" {
		return ""
	}
	return fmt.Sprintf(" (%s:%d)", o.File, o.Line)
}
