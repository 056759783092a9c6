package agentbridge

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// claudeFiles are the names, in a project directory, that Claude Code on
// the host reads as its own configuration or instructions: settings that
// can turn hooks off or add commands it runs, MCP servers it starts, and
// the memory files it sends to the model.
var claudeFiles = []string{".claude", ".mcp.json", "CLAUDE.md", "CLAUDE.local.md"}

// newSpecFile stands for a spec file the guest would add to the
// configuration directory: sbx loads every *.hcl file there.
const newSpecFile = "sbx-guest-added.hcl"

// CheckMounts returns an error when a read-write mount of mounts lets the
// guest write what the host reads as configuration once the guest has
// written it: Claude Code's files (claudeFiles) in any of projects, and
// the sbx configuration in configDir (its *.hcl files, the lock and
// .sbx), from which the session's next sandbox is started. Each such
// path must be hidden, read-only or in memory (tmpfs) by the mount's
// rules. Relative mount host paths are relative to configDir.
func CheckMounts(configDir string, projects []string, mounts []policy.Mount) error {
	var paths []string
	for _, d := range projects {
		for _, n := range claudeFiles {
			paths = append(paths, filepath.Join(d, n))
		}
	}
	specs, _ := filepath.Glob(filepath.Join(configDir, "*.hcl"))
	paths = append(paths, specs...)
	paths = append(paths, filepath.Join(configDir, newSpecFile), filepath.Join(configDir, ".sbx"))
	for _, m := range mounts {
		if m.Access != policy.ReadWrite {
			continue
		}
		host := m.Host
		if !filepath.IsAbs(host) {
			host = filepath.Join(configDir, host)
		}
		rules, err := match.CompileMountRules(m.Hide, m.ReadOnly, m.Tmpfs)
		if err != nil {
			return fmt.Errorf("mount %q (%s): %w", m.Guest, origin(m.Origin), err)
		}
		var open []string
		for _, p := range paths {
			rel, err := filepath.Rel(host, p)
			if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			rel = filepath.ToSlash(rel)
			if rules.Classify(rel) == match.Plain {
				if filepath.Base(p) == newSpecFile {
					rel = strings.TrimSuffix(rel, newSpecFile) + "*.hcl"
				}
				open = append(open, rel)
			}
		}
		if len(open) > 0 {
			return fmt.Errorf("mount %q (%s) lets the guest write %s, which the host reads as configuration (Claude Code's settings, hooks, MCP servers and memory files; the spec the session's next sandbox starts from): make them read-only in the mount, readonly = [%s]",
				m.Guest, origin(m.Origin), strings.Join(open, ", "), quoteList(open))
		}
	}
	return nil
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func origin(o policy.Origin) string {
	if o.File == "" {
		return o.Block
	}
	return fmt.Sprintf("%s, %s:%d", o.Block, o.File, o.Line)
}
