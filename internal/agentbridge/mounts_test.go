package agentbridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

func TestCheckMounts(t *testing.T) {
	cfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg, "sbx.hcl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(cfg, "app")
	guarded := []string{".claude", ".mcp.json", "CLAUDE.md", "CLAUDE.local.md"}
	appGuarded := make([]string, len(guarded))
	for i, g := range guarded {
		appGuarded[i] = "app/" + g
	}
	all := append([]string{"*.hcl", ".sbx"}, appGuarded...)
	rw := func(host string, readonly, hide, tmpfs []string) policy.Mount {
		return policy.Mount{Guest: "/workspace", Host: host, Access: policy.ReadWrite, ReadOnly: readonly, Hide: hide, Tmpfs: tmpfs,
			Origin: policy.Origin{Block: "mount./workspace", File: "sbx.hcl", Line: 3}}
	}
	for _, c := range []struct {
		name  string
		m     policy.Mount
		wants []string // what the error must name; none: no error
	}{
		{"config dir read-write, nothing guarded", rw(".", nil, nil, nil), []string{"*.hcl", "sbx.hcl", ".sbx", "app/.claude", "app/.mcp.json", "app/CLAUDE.md", "sbx.hcl:3"}},
		{"all read-only", rw(".", all, nil, nil), nil},
		{"hidden or in memory", rw(".", []string{"*.hcl"}, []string{".sbx", "app/.claude"}, []string{"app/.mcp.json", "app/CLAUDE.md", "app/CLAUDE.local.md"}), nil},
		{"one left", rw(".", all[:len(all)-1], nil, nil), []string{"app/CLAUDE.local.md"}},
		{"an existing spec read-only but new ones not", rw(".", append([]string{"sbx.hcl", ".sbx"}, appGuarded...), nil, nil), []string{"*.hcl"}},
		{"the project alone, absolute", rw(project, guarded, nil, nil), nil},
		{"the project alone, unguarded", rw(project, nil, nil, nil), []string{".claude", ".mcp.json"}},
		{"read-only mount", policy.Mount{Guest: "/w", Host: ".", Access: policy.ReadOnly}, nil},
		{"a mount beside the project", rw(filepath.Join(cfg, "data"), nil, nil, nil), nil},
		{"a directory under the project", rw(filepath.Join(project, "src"), nil, nil, nil), nil},
	} {
		err := CheckMounts(cfg, []string{project}, []policy.Mount{c.m})
		if len(c.wants) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not name %s: %v", c.name, w, err)
			}
		}
	}
}
