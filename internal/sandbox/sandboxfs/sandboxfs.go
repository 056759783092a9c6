package sandboxfs

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// Mount is one mount as a started sandbox serves it.
type Mount struct {
	// Policy is the mount as the sandbox's policy has it.
	Policy policy.Mount `json:"policy"`
	// HostDir is its host directory, absolute.
	HostDir string `json:"host_dir"`
	// UID and GID own every file the guest sees there.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Resolve returns the mounts of sandbox sb of cfg as a started sandbox
// serves them, in the policy's order.
func Resolve(cfg *lang.Config, sb *lang.Sandbox) ([]Mount, error) {
	img := cfg.Images[sb.Image]
	var out []Mount
	for _, m := range sb.Policy.Mounts {
		owner := m.Owner
		if owner == "" {
			owner = sb.User
		}
		uid, gid, err := userIDs(img, owner)
		if err != nil {
			return nil, fmt.Errorf("mount %s%s: %w", m.Guest, where(m.Origin), err)
		}
		host, err := hostDir(cfg.Dir, m.Host)
		if err != nil {
			return nil, fmt.Errorf("mount %s%s: %w", m.Guest, where(m.Origin), err)
		}
		out = append(out, Mount{Policy: m, HostDir: host, UID: uid, GID: gid})
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

func where(o policy.Origin) string {
	if o.File == "" {
		return ""
	}
	return fmt.Sprintf(" (%s:%d)", o.File, o.Line)
}

// Set is the file servers of one sandbox's mounts.
type Set struct {
	servers []io.Closer
	ports   map[string]machine.Port
	guest   []agentproto.Mount
}

// Ports are the machine's ports that carry the mounts.
func (s *Set) Ports() map[string]machine.Port { return s.ports }

// Guest is what the guest agent must mount.
func (s *Set) Guest() []agentproto.Mount { return s.guest }

// Close releases every host directory. The machine must have stopped.
func (s *Set) Close() error {
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Close())
	}
	s.servers = nil
	return errors.Join(errs...)
}
