package agentbridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/policy/match"
)

// fileTools are the file tools the bridge routes, and whether each
// changes the file.
var fileTools = map[string]bool{"Read": false, "Write": true, "Edit": true, "MultiEdit": true}

// Mount is a sandbox mount as the file routing sees it: the host
// directory (absolute), the guest directory, and the policy's rules.
type Mount struct {
	HostDir string
	Policy  policy.Mount
}

// FilePlace says where a file tool's path is.
type FilePlace int

const (
	// OnHost: the path is in a mount's host directory, a plain path by
	// its rules: the tool runs on the host file, the bytes the guest
	// sees.
	OnHost FilePlace = iota + 1
	// InGuest: the guest alone has the file (outside every mount, or in
	// a mount's tmpfs): the tool runs on the session's shadow copy.
	InGuest
)

// FileRoute is where a file tool call goes: the host path the tool
// runs on (the file itself, or its shadow) and, for InGuest, the guest
// path the shadow stands for.
type FileRoute struct {
	Place     FilePlace
	HostPath  string
	GuestPath string
}

// RouteFile decides where tool's path goes. path is what the model
// wrote: absolute, or relative to cwd (as Claude Code takes it); it is
// cleaned, so ".." and a trailing slash name what the tool would open.
// shadow is the session's shadow directory: a path under it stands for
// the guest path it copies.
//
// A path under a mount's host directory is classified by the mount's
// rules in policy/match, as the file server classifies it: hidden is
// refused, naming the rule; readonly (or any path of a read-only mount,
// or in a .git directory) is refused to a tool that writes; tmpfs is the
// guest's; plain is the host file. The class is taken of the path as
// written and lower-cased (against lower-cased rules), so that a host
// file system that folds case cannot open a hidden file by another
// spelling. A path with a symbolic link anywhere below the mount's
// directory, or that names "~", is refused: the host tool would follow
// it where the rules were not applied.
func RouteFile(tool, path, cwd string, mounts []Mount, shadow string) (FileRoute, error) {
	writes, ok := fileTools[tool]
	if !ok {
		return FileRoute{}, fmt.Errorf("%s is not a file tool the bridge routes", tool)
	}
	if path == "" || strings.HasPrefix(path, "~") || strings.ContainsRune(path, 0) {
		return FileRoute{}, fmt.Errorf("the %s call's file_path %q is not a path sbx takes (absolute, or relative to the working directory)", tool, path)
	}
	if !filepath.IsAbs(path) {
		if !filepath.IsAbs(cwd) {
			return FileRoute{}, fmt.Errorf("the %s call's file_path %q is relative and the hook input's cwd %q is not absolute", tool, path, cwd)
		}
		path = filepath.Join(cwd, path)
	}
	path = filepath.Clean(path)
	shadow = filepath.Clean(shadow)
	if rel, ok := under(shadow, path); ok {
		guest := "/" + rel
		if rel == "" {
			return FileRoute{}, fmt.Errorf("%s is the session's shadow directory, not a file", path)
		}
		return FileRoute{Place: InGuest, HostPath: path, GuestPath: guest}, nil
	}
	for _, m := range mounts {
		root := filepath.Clean(m.HostDir)
		rel, ok := under(root, path)
		if !ok {
			continue
		}
		rel = filepath.ToSlash(rel)
		where := fmt.Sprintf("mount %q (%s)", m.Policy.Guest, origin(m.Policy.Origin))
		class, rule, err := classify(m.Policy, rel)
		if err != nil {
			return FileRoute{}, fmt.Errorf("%s: %w", where, err)
		}
		switch {
		case class == match.Hidden:
			return FileRoute{}, fmt.Errorf("%s is hidden from the sandbox by the rule hide = %q of %s", path, rule, where)
		case class == match.TmpfsPath:
			return FileRoute{Place: InGuest, HostPath: filepath.Join(shadow, m.Policy.Guest, rel), GuestPath: filepath.Join(m.Policy.Guest, rel)}, nil
		case writes && class == match.ReadOnlyPath:
			return FileRoute{}, fmt.Errorf("%s is read-only in the sandbox by the rule readonly = %q of %s: %s may not change it", path, rule, where, tool)
		case writes && m.Policy.Access != policy.ReadWrite:
			return FileRoute{}, fmt.Errorf("%s is in %s, which is read-only: %s may not change it", path, where, tool)
		case writes && hasGitDir(rel):
			return FileRoute{}, fmt.Errorf("%s is in a .git directory, which the sandbox's file tools do not change on the host (use git in Bash)", path)
		}
		if err := noLinks(root, rel); err != nil {
			return FileRoute{}, err
		}
		return FileRoute{Place: OnHost, HostPath: path}, nil
	}
	return FileRoute{Place: InGuest, HostPath: filepath.Join(shadow, path), GuestPath: path}, nil
}

// under returns path relative to root ("" for root itself) when path is
// root or below it.
func under(root, path string) (string, bool) {
	if path == root {
		return "", true
	}
	if root == "/" {
		return path[1:], true
	}
	rel, ok := strings.CutPrefix(path, root+string(filepath.Separator))
	return rel, ok
}

// classify returns the class of rel under m's rules, the stricter of the
// path as written and lower-cased, and the rule that made it.
func classify(m policy.Mount, rel string) (match.Class, string, error) {
	rules, err := match.CompileMountRules(m.Hide, m.ReadOnly, m.Tmpfs)
	if err != nil {
		return 0, "", err
	}
	folded, err := match.CompileMountRules(lower(m.Hide), lower(m.ReadOnly), lower(m.Tmpfs))
	if err != nil {
		return 0, "", err
	}
	c, r := rules.Classify(rel), rules
	if fc := folded.Classify(strings.ToLower(rel)); fc > c {
		c, r = fc, folded
		rel = strings.ToLower(rel)
	}
	var pats []*match.Mount
	switch c {
	case match.Hidden:
		pats = r.Hide
	case match.ReadOnlyPath:
		pats = r.ReadOnly
	case match.TmpfsPath:
		pats = r.Tmpfs
	default:
		return c, "", nil
	}
	names := match.Split(rel)
	for i := range names {
		for _, p := range pats {
			if p.MatchNames(names[:i+1]) {
				return c, p.String(), nil
			}
		}
	}
	return c, "?", nil
}

func lower(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strings.ToLower(v)
	}
	return out
}

func hasGitDir(rel string) bool {
	for _, n := range match.Split(rel) {
		if strings.EqualFold(n, ".git") {
			return true
		}
	}
	return false
}

// noLinks returns an error when root/rel, or any directory between root
// and it, is a symbolic link. Names that do not exist end the walk (a
// Write may create them).
func noLinks(root, rel string) error {
	p := root
	for _, n := range match.Split(rel) {
		p = filepath.Join(p, n)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot check %s: %w", p, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: the host tool would follow it where the mount's rules are not applied; use Bash in the sandbox", p)
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file or directory", p)
		}
	}
	return nil
}
