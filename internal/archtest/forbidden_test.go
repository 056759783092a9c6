package archtest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// vocabulary is the public vocabulary: the packages every layer may
// import, which import nothing internal themselves.
var vocabulary = []string{"addrs/...", "lang/...", "platform/...", "policy/..."}

// A rule forbids the packages matching from (other than those matching
// fixtures) to reach, through any chain of imports, a module package
// matching to, unless it matches except. A direct rule forbids only
// importing such a package itself: everything above the VM layer
// reaches QEMU through it, but only some may name QEMU.
type rule struct {
	from, fixtures, to, except []string
	direct                     bool
	why                        string
}

// rules is the table of forbidden edges (docs/architecture.md).
var rules = []rule{
	{
		from: []string{"internal/egress/..."},
		to:   []string{"internal/machine/..."},
		why:  "the egress stack serves a VM's network; what it needs of the VM is in internal/proto/netstream",
	},
	{
		from: []string{"internal/machine/..."},
		// machinetest builds a small image for the machine's own tests.
		fixtures: []string{"internal/machine/machinetest"},
		to:       []string{"internal/build/...", "internal/sandbox/...", "internal/supervisor/...", "internal/egress/...", "internal/vfs/...", "lang/..."},
		why:      "the VM layer boots plain files and serves what it is given; the builders that make the files and the sandbox that enforces policy around it sit above it",
	},
	{
		from: []string{"internal/sandbox/..."},
		to:   []string{"internal/build/...", "lang/...", "internal/supervisor/...", "internal/operation/...", "internal/pipeline/..."},
		why:  "a sandbox starts a resolved Spec: turning a configuration into one and building its image is the layer above",
	},
	{
		from: []string{"internal/plan/..."},
		to:   []string{"internal/vfs/...", "internal/build/..."},
		why:  "the planner is pure data: it classifies with policy/match, not with the 9P server, and builds nothing",
	},
	{
		from: []string{"internal/supervisor/..."},
		to:   []string{"lang/..."},
		why:  "the long-lived runtime runs a resolved sandbox spec, not the spec language",
	},
	{
		from: vocabulary,
		to:   []string{"internal/..."},
		why:  "the public vocabulary is usable outside the module only if it imports nothing internal",
	},
	{
		from:   []string{"internal/proto/..."},
		to:     []string{"..."},
		except: append([]string{"internal/proto/..."}, vocabulary...),
		why:    "the wire contracts are shared by host and guest: they import only each other and the vocabulary",
	},
	{
		from:   []string{"cmd/sbx-guest", "internal/guest/..."},
		to:     []string{"..."},
		except: append([]string{"internal/guest/...", "internal/proto/...", "internal/hostenv"}, vocabulary...),
		why:    "the guest agent runs inside every sandbox and speaks to the host only through the wire contracts: it links none of the host's packages",
	},
	{
		from: []string{"..."},
		// The doctor (hostcheck) checks the QEMU install itself.
		fixtures: []string{"internal/machine/...", "bench/...", "internal/hostcheck"},
		to:       []string{"internal/machine/qemu/..."},
		direct:   true,
		why:      "the layers above the machine reach QEMU through machine.Hypervisor; only the benchmarks set QEMU up themselves",
	},
	{
		from:     []string{"..."},
		fixtures: []string{"internal/machine/..."},
		to:       []string{"internal/machine/vm"},
		direct:   true,
		why:      "the hypervisor-neutral VM description (vm.Bench among it) is the machine's and its hypervisors' own; the layers above set a machine.Options",
	},
}

// pending are forbidden edges still present on this branch, each being
// removed by a change of its own; an entry that no longer occurs fails
// the test, so that it is deleted here once its change is in.
var pending = []struct{ from, to string }{}

// violation is a package reaching a forbidden one, by the chain of
// imports path (from the package to the forbidden one).
type violation struct {
	rule *rule
	path []string
}

func (v violation) from() string { return v.path[0] }
func (v violation) to() string   { return v.path[len(v.path)-1] }

func (v violation) String() string {
	names := make([]string, len(v.path))
	for i, p := range v.path {
		names[i] = show(p)
	}
	verb := "reach"
	if v.rule.direct {
		verb = "import"
	}
	return fmt.Sprintf("%s must not %s %s (%s): %s", names[0], verb, names[len(names)-1], v.rule.why, strings.Join(names, " → "))
}

// show is a module-relative package path as the failures print it.
func show(rel string) string {
	if rel == "" {
		return "sbx"
	}
	return rel
}

func (r *rule) forbids(p string) bool {
	return matchAny(r.to, p) && !matchAny(r.except, p)
}

// pendingIndex is the index in pending of the entry that allows v, or
// -1.
func pendingIndex(v violation) int {
	for i, e := range pending {
		if match(e.from, v.from()) && match(e.to, v.to()) {
			return i
		}
	}
	return -1
}

// violations walks each module package's imports breadth first, so
// that the chain each violation reports is a shortest one, and returns
// every forbidden package each package reaches, for each rule.
func violations(graph map[string][]string) []violation {
	var out []violation
	for p := range graph {
		for i := range rules {
			r := &rules[i]
			if !matchAny(r.from, p) || matchAny(r.fixtures, p) {
				continue
			}
			if r.direct {
				for _, d := range graph[p] {
					if r.forbids(d) {
						out = append(out, violation{rule: r, path: []string{p, d}})
					}
				}
				continue
			}
			parent := map[string]string{p: ""}
			queue := []string{p}
			for len(queue) > 0 {
				q := queue[0]
				queue = queue[1:]
				if q != p && r.forbids(q) && !matchAny(r.from, q) {
					var chain []string
					for x := q; ; x = parent[x] {
						chain = append([]string{x}, chain...)
						if x == p {
							break
						}
					}
					out = append(out, violation{rule: r, path: chain})
				}
				for _, d := range graph[q] {
					if _, seen := parent[d]; !seen {
						parent[d] = q
						queue = append(queue, d)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b violation) int {
		return cmp.Or(cmp.Compare(a.from(), b.from()), cmp.Compare(len(a.path), len(b.path)), cmp.Compare(a.to(), b.to()))
	})
	return out
}

// report fails t on the violations no pending entry allows, and logs
// the others, one line per package and rule: the shortest chain, and
// how many more forbidden packages it reaches. It returns which pending
// entries were used.
func report(t *testing.T, vs []violation) map[int]bool {
	used := map[int]bool{}
	type key struct {
		from    string
		rule    *rule
		pending bool
	}
	first := map[key]violation{}
	more := map[key]int{}
	var order []key
	for _, v := range vs {
		i := pendingIndex(v)
		if i >= 0 {
			used[i] = true
		}
		k := key{v.from(), v.rule, i >= 0}
		if _, ok := first[k]; ok {
			more[k]++
			continue
		}
		first[k] = v
		order = append(order, k)
	}
	for _, k := range order {
		msg := first[k].String()
		if n := more[k]; n > 0 {
			msg += fmt.Sprintf(" (and %d more forbidden packages)", n)
		}
		if k.pending {
			t.Logf("pending: %s", msg)
		} else {
			t.Error(msg)
		}
	}
	return used
}

// graph loads the module's import graph for goos: each module package's
// module-relative path to those of the module packages it imports.
func graph(t *testing.T, goos string) map[string][]string {
	pkgs := load(t, packages.NeedName|packages.NeedImports|packages.NeedDeps, goos, module+"/...")
	g := map[string][]string{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		from, ok := rel(p.PkgPath)
		if !ok {
			return
		}
		g[from] = nil
		for path := range p.Imports {
			if to, ok := rel(path); ok {
				g[from] = append(g[from], to)
			}
		}
	})
	return g
}

// TestForbiddenImports fails on every package that reaches a package
// the rules forbid it, naming the chain of imports, as linux and as
// darwin build the module.
func TestForbiddenImports(t *testing.T) {
	used := map[int]bool{}
	for _, goos := range []string{"linux", "darwin"} {
		t.Run(goos, func(t *testing.T) {
			maps.Copy(used, report(t, violations(graph(t, goos))))
		})
	}
	for i, e := range pending {
		if !used[i] {
			t.Errorf("the pending edge %s ↛ %s no longer occurs: delete it from pending", e.from, e.to)
		}
	}
}

// TestViolations checks the walk itself on a small graph: the chain is
// a shortest one, an exception is allowed, and a package reaching
// nothing forbidden is clean.
func TestViolations(t *testing.T) {
	g := map[string][]string{
		"internal/egress/netstack": {"internal/egress/audit", "internal/proto/netstream"},
		"internal/egress/audit":    {"internal/state"},
		"internal/state":           {"internal/machine/qemu"},
		"internal/machine/qemu":    nil,
		"internal/proto/netstream": {"addrs"},
		"addrs":                    nil,
	}
	vs := violations(g)
	var got []string
	for _, v := range vs {
		got = append(got, strings.Join(v.path, " → "))
	}
	want := "internal/egress/netstack → internal/egress/audit → internal/state → internal/machine/qemu"
	if !strings.Contains(strings.Join(got, "\n"), want) {
		t.Errorf("violations = %q, want one %q", got, want)
	}
	for _, v := range vs {
		if v.path[0] == "internal/proto/netstream" || v.path[0] == "addrs" {
			t.Errorf("a clean package reported: %s", v)
		}
	}
}

// TestDirectViolations: a direct rule reports a package that imports a
// forbidden one itself, and not one that only reaches it through an
// allowed package.
func TestDirectViolations(t *testing.T) {
	g := map[string][]string{
		"internal/sandbox":      {"internal/machine"},
		"internal/supervisor":   {"internal/sandbox", "internal/machine/qemu"},
		"internal/machine":      {"internal/machine/qemu"},
		"internal/machine/qemu": nil,
	}
	var got []string
	for _, v := range violations(g) {
		if v.rule.direct {
			got = append(got, strings.Join(v.path, " → "))
		}
	}
	want := []string{"internal/supervisor → internal/machine/qemu"}
	if !slices.Equal(got, want) {
		t.Errorf("direct violations = %q, want %q", got, want)
	}
}
