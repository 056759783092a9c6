package debrepo

import (
	"archive/tar"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/layers"
)

// alternative is one `update-alternatives --install` a postinst runs.
type alternative struct {
	link, name, path string
	priority         int
	slaves           []slaveLink
	pkg              string
}

type slaveLink struct{ link, name, path string }

// parseAlternatives finds the `update-alternatives --install LINK NAME
// PATH PRIORITY [--slave LINK NAME PATH]…` commands of a maintainer
// script whose arguments are literal words. A command that computes an
// argument (a $ or a quote in it) is left out, and so is every slave
// after the first computed word.
func parseAlternatives(script, pkg string) []alternative {
	script = strings.ReplaceAll(script, "\\\n", " ")
	var out []alternative
	for _, line := range strings.Split(script, "\n") {
		i := strings.Index(line, "update-alternatives --install ")
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+len("update-alternatives --install "):])
		literal := func(s string) bool {
			return s != "" && !strings.ContainsAny(s, "$`\"'();|&<>")
		}
		if len(f) < 4 || !literal(f[0]) || !literal(f[1]) || !literal(f[2]) {
			continue
		}
		prio, err := strconv.Atoi(f[3])
		if err != nil {
			continue
		}
		if !altPath(f[0]) || !altName(f[1]) || !altPath(f[2]) {
			continue
		}
		a := alternative{link: f[0], name: f[1], path: f[2], priority: prio, pkg: pkg}
		for rest := f[4:]; len(rest) >= 4 && rest[0] == "--slave" && literal(rest[1]) && literal(rest[2]) && literal(rest[3]); rest = rest[4:] {
			if altPath(rest[1]) && altName(rest[2]) && altPath(rest[3]) {
				a.slaves = append(a.slaves, slaveLink{rest[1], rest[2], rest[3]})
			}
		}
		out = append(out, a)
	}
	return out
}

// applyAlternatives makes the links update-alternatives would in auto
// mode: for each name the highest priority whose target is in the tree
// (ties to the package first by name), LINK → /etc/alternatives/NAME →
// PATH, the same for each slave whose target is there, and dpkg's
// record in /var/lib/dpkg/alternatives/NAME. A link path that already
// holds something is left alone.
func applyAlternatives(tree *layers.Tree, alts []alternative) error {
	best := map[string]alternative{}
	for _, a := range alts {
		if _, ok := resolveIn(tree, rewrite(tree, a.path)); !ok {
			continue
		}
		if b, ok := best[a.name]; !ok || a.priority > b.priority {
			best[a.name] = a
		}
	}
	names := make([]string, 0, len(best))
	for n := range best {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, d := range []string{"/etc/alternatives", "/var/lib/dpkg/alternatives"} {
		if _, ok := tree.Lookup(d); !ok && len(names) > 0 {
			if err := tree.Add(layers.Entry{Path: d, Type: tar.TypeDir, Mode: 0o755}, nil); err != nil {
				return err
			}
		}
	}
	for _, n := range names {
		a := best[n]
		links := []slaveLink{{a.link, a.name, a.path}}
		for _, s := range a.slaves {
			if _, ok := resolveIn(tree, rewrite(tree, s.path)); ok {
				links = append(links, s)
			}
		}
		var admin strings.Builder
		fmt.Fprintf(&admin, "auto\n%s\n", a.link)
		for _, s := range links[1:] {
			fmt.Fprintf(&admin, "%s\n%s\n", s.name, s.link)
		}
		fmt.Fprintf(&admin, "\n%s\n%d\n", a.path, a.priority)
		for _, s := range links[1:] {
			fmt.Fprintf(&admin, "%s\n", s.path)
		}
		admin.WriteString("\n")
		for _, l := range links {
			if err := addLink(tree, "/etc/alternatives/"+l.name, l.path); err != nil {
				return err
			}
			if err := addLink(tree, rewrite(tree, l.link), "/etc/alternatives/"+l.name); err != nil {
				return err
			}
		}
		if err := putFile(tree, "/var/lib/dpkg/alternatives/"+n, admin.String()); err != nil {
			return err
		}
	}
	return nil
}

// addLink adds a symbolic link at p unless something is there or its
// parent is not a directory of the tree.
func addLink(tree *layers.Tree, p, target string) error {
	if _, ok := tree.Lookup(p); ok {
		return nil
	}
	parent := p[:strings.LastIndex(p, "/")]
	if parent != "" {
		if e, ok := tree.Lookup(parent); !ok || e.Type != tar.TypeDir {
			return nil
		}
	}
	return tree.Add(layers.Entry{Path: p, Type: tar.TypeSymlink, Mode: 0o777, Linkname: target}, nil)
}

// altPath accepts an absolute, clean path below the root.
func altPath(p string) bool {
	return strings.HasPrefix(p, "/") && p != "/" && path.Clean(p) == p
}

// altName accepts an alternative's name, a file name in
// /etc/alternatives.
func altName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\x00")
}
