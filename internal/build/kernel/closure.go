package kernel

import (
	"fmt"
	"sort"
	"strings"
)

// UnknownModuleError says a kernel has no module by a name: no module file
// is called that or has it as an alias, and none is built in by it.
type UnknownModuleError struct {
	Kernel string // the kernel version
	Name   string
	// By is the module whose dependency it is, or "" when the name was
	// asked for.
	By   string
	Near []string // similar module names, at most five
}

func (e *UnknownModuleError) Error() string {
	s := fmt.Sprintf("kernel %s has no module %q", e.Kernel, e.Name)
	if e.By != "" {
		s = fmt.Sprintf("module %s depends on %q, which kernel %s neither ships nor builds in", e.By, e.Name, e.Kernel)
	}
	if len(e.Near) > 0 {
		s += "; near: " + strings.Join(e.Near, ", ")
	}
	return s
}

// Closure returns the module files to load, in order, so that every
// module named in names (module names or aliases; "-" and "_" alike) is
// present: each dependency comes before the modules needing it, soft
// "pre:" dependencies before and "post:" ones after their module. Built-in
// modules need no file and are left out. Each module appears once; the
// order is fixed by names and the archive. A name the kernel does not
// know is an *UnknownModuleError; an unknown soft dependency is skipped,
// as modprobe skips it.
func (k *Kernel) Closure(names []string) ([]*Module, error) {
	c := closure{k: k, state: map[string]int{}}
	for _, n := range names {
		m, builtin := k.resolve(n)
		if builtin {
			continue
		}
		if m == nil {
			return nil, &UnknownModuleError{Kernel: k.Version, Name: n, Near: k.near(n)}
		}
		if err := c.visit(m, nil); err != nil {
			return nil, err
		}
	}
	return c.order, nil
}

// IsBuiltin reports whether the module called name (or having it as an
// alias) is compiled into the kernel image.
func (k *Kernel) IsBuiltin(name string) bool {
	_, builtin := k.resolve(name)
	return builtin
}

// resolve finds the module for a name: a module file of that name, a
// built-in module of that name, a built-in module with that alias, or
// the first module file (by name) with that alias.
func (k *Kernel) resolve(name string) (m *Module, builtin bool) {
	c := canonical(name)
	if m := k.Modules[c]; m != nil {
		return m, false
	}
	if k.Builtin[c] {
		return nil, true
	}
	if _, ok := k.builtinAliases[name]; ok {
		return nil, true
	}
	if providers := k.aliases[name]; len(providers) > 0 {
		return k.Modules[providers[0]], false
	}
	return nil, false
}

const (
	visiting = 1
	done     = 2
)

type closure struct {
	k     *Kernel
	state map[string]int
	order []*Module
}

func (c *closure) visit(m *Module, stack []string) error {
	switch c.state[m.Name] {
	case done:
		return nil
	case visiting:
		i := 0
		for i < len(stack) && stack[i] != m.Name {
			i++
		}
		return fmt.Errorf("kernel %s: modules depend on each other in a cycle: %s -> %s",
			c.k.Version, strings.Join(stack[i:], " -> "), m.Name)
	}
	c.state[m.Name] = visiting
	stack = append(stack, m.Name)
	for _, s := range m.SoftPre {
		if d, _ := c.k.resolve(s); d != nil && c.state[d.Name] != visiting {
			if err := c.visit(d, stack); err != nil {
				return err
			}
		}
	}
	for _, dep := range m.Depends {
		d, builtin := c.k.resolve(dep)
		if builtin {
			continue
		}
		if d == nil {
			return &UnknownModuleError{Kernel: c.k.Version, Name: dep, By: m.Name}
		}
		if err := c.visit(d, stack); err != nil {
			return err
		}
	}
	c.state[m.Name] = done
	c.order = append(c.order, m)
	for _, s := range m.SoftPost {
		if d, _ := c.k.resolve(s); d != nil && c.state[d.Name] == 0 {
			if err := c.visit(d, stack[:len(stack)-1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// near lists module names close to name, for error messages.
func (k *Kernel) near(name string) []string {
	c := canonical(name)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for n := range k.Modules {
		d := distance(c, n)
		if d <= 2 || (len(c) >= 3 && strings.HasPrefix(n, c)) {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for _, x := range cs[:min(len(cs), 5)] {
		out = append(out, x.name)
	}
	return out
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
