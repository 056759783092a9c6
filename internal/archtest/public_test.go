package archtest

import (
	"fmt"
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// public are the module's public packages, relative to the module: the
// Go API (the root package sbx) and the vocabulary it speaks. Adding one
// is a decision about what the module supports, made here.
var public = []string{".", "addrs", "lang", "platform", "policy", "policy/match"}

// publicPending are packages of public that do not exist on this branch
// yet.
var publicPending = []string{}

// isInternal reports whether path is an internal package of the
// module: one with an element "internal", which the go command lets
// only the module import (internal/..., bench/internal/...).
func isInternal(path string) bool {
	r, ok := rel(path)
	return ok && slices.Contains(strings.Split(r, "/"), "internal")
}

// TestPublicPackages fails when the importable packages outside
// internal/ are not exactly the public list.
func TestPublicPackages(t *testing.T) {
	pkgs := load(t, packages.NeedName, "", module+"/...")
	var got []string
	for _, p := range pkgs {
		r, _ := rel(p.PkgPath)
		if p.Name == "main" || isInternal(p.PkgPath) {
			continue
		}
		if r == "" {
			r = "."
		}
		got = append(got, r)
		if !slices.Contains(public, r) {
			t.Errorf("%s is a public package not in the list: move it under internal/, or add it to public in %s", p.PkgPath, "internal/archtest/public_test.go")
		}
	}
	for _, want := range public {
		if !slices.Contains(got, want) && !slices.Contains(publicPending, want) {
			t.Errorf("the public package %s is missing", want)
		}
	}
}

// leak is an exported identifier that mentions an internal type.
type leak struct {
	ident string // "sbx.Sandbox.Machine", "sbx.Cmd"
	typ   string // the internal type
}

// leaks returns the exported identifiers of pkg whose types mention an
// internal package's type: functions' parameters and results, exported
// struct fields (embedded ones too), methods (of types and interfaces),
// aliases, variables and constants.
func leaks(pkg *types.Package, internal func(string) bool) []leak {
	var out []leak
	check := func(ident string, t types.Type) {
		seen := map[types.Type]bool{}
		for _, n := range mentions(t, seen) {
			if n.Obj().Pkg() != nil && internal(n.Obj().Pkg().Path()) {
				out = append(out, leak{ident, n.Obj().Pkg().Path() + "." + n.Obj().Name()})
			}
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		ident := pkg.Name() + "." + name
		switch obj := obj.(type) {
		case *types.TypeName:
			if obj.IsAlias() {
				check(ident, obj.Type())
				continue
			}
			named, ok := obj.Type().(*types.Named)
			if !ok {
				continue
			}
			members(ident, named, check)
		default: // *types.Func, *types.Var, *types.Const
			check(ident, obj.Type())
		}
	}
	return out
}

// members checks what a named type exports: its underlying type's
// exported fields or methods, and its own exported methods.
func members(ident string, named *types.Named, check func(string, types.Type)) {
	switch u := named.Underlying().(type) {
	case *types.Struct:
		for f := range u.Fields() {
			if f.Exported() {
				check(ident+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range u.Methods() {
			if m.Exported() {
				check(ident+"."+m.Name(), m.Type())
			}
		}
	default:
		check(ident, u)
	}
	for m := range named.Methods() {
		if m.Exported() {
			check(ident+"."+m.Name(), m.Type())
		}
	}
}

// mentions returns the named types t is built from, itself included:
// the elements of pointers, slices, arrays, maps and channels, the
// parameters and results of signatures, the exported fields of
// anonymous structs, the methods of anonymous interfaces, type
// arguments. It does not look inside a named type: those are checked
// where they are declared.
func mentions(t types.Type, seen map[types.Type]bool) []*types.Named {
	if t == nil || seen[t] {
		return nil
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		out := []*types.Named{t}
		for a := range t.TypeArgs().Types() {
			out = append(out, mentions(a, seen)...)
		}
		return out
	case *types.Alias:
		return mentions(types.Unalias(t), seen)
	case *types.Pointer:
		return mentions(t.Elem(), seen)
	case *types.Slice:
		return mentions(t.Elem(), seen)
	case *types.Array:
		return mentions(t.Elem(), seen)
	case *types.Chan:
		return mentions(t.Elem(), seen)
	case *types.Map:
		return append(mentions(t.Key(), seen), mentions(t.Elem(), seen)...)
	case *types.Signature:
		var out []*types.Named
		for v := range t.Params().Variables() {
			out = append(out, mentions(v.Type(), seen)...)
		}
		for v := range t.Results().Variables() {
			out = append(out, mentions(v.Type(), seen)...)
		}
		return out
	case *types.Struct:
		var out []*types.Named
		for f := range t.Fields() {
			if f.Exported() {
				out = append(out, mentions(f.Type(), seen)...)
			}
		}
		return out
	case *types.Interface:
		var out []*types.Named
		for m := range t.Methods() {
			if m.Exported() {
				out = append(out, mentions(m.Type(), seen)...)
			}
		}
		for e := range t.EmbeddedTypes() {
			out = append(out, mentions(e, seen)...)
		}
		return out
	}
	return nil
}

// count is the number of a package's exported identifiers: top-level
// names, and the exported fields and methods of its exported types.
func count(pkg *types.Package) (names, members int) {
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		names++
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		for m := range named.Methods() {
			if m.Exported() {
				members++
			}
		}
		if s, ok := named.Underlying().(*types.Struct); ok {
			for f := range s.Fields() {
				if f.Exported() {
					members++
				}
			}
		}
	}
	return names, members
}

// TestPublicAPI fails on every exported identifier of a public package
// that mentions a type of an internal package, and logs how many
// identifiers each public package exports.
func TestPublicAPI(t *testing.T) {
	var patterns []string
	for _, p := range public {
		if slices.Contains(publicPending, p) {
			continue
		}
		if p == "." {
			patterns = append(patterns, module)
		} else {
			patterns = append(patterns, module+"/"+p)
		}
	}
	pkgs := load(t, packages.NeedName|packages.NeedTypes, "", patterns...)
	total := 0
	for _, p := range pkgs {
		names, members := count(p.Types)
		total += names + members
		t.Logf("%s: %d exported names, %d exported fields and methods", p.PkgPath, names, members)
		for _, l := range leaks(p.Types, isInternal) {
			t.Errorf("%s mentions %s, an internal type a program outside the module cannot name", l.ident, l.typ)
		}
	}
	t.Logf("public packages: %d exported identifiers in all", total)
}

// TestLeaks checks the walk on a package built here: every place an
// internal type can hide is found, and an unexported one is not.
func TestLeaks(t *testing.T) {
	in := types.NewPackage(module+"/internal/x", "x")
	secret := types.NewNamed(types.NewTypeName(0, in, "Secret", nil), types.NewStruct(nil, nil), nil)
	pub := types.NewPackage(module, "sbx")
	scope := pub.Scope()
	v := func(name string, t types.Type) *types.Var { return types.NewVar(0, pub, name, t) }
	sig := func(params ...*types.Var) *types.Signature {
		return types.NewSignatureType(nil, nil, nil, types.NewTuple(params...), nil, false)
	}
	scope.Insert(types.NewFunc(0, pub, "F", sig(v("m", types.NewMap(types.Typ[types.String], types.NewSlice(secret))))))
	scope.Insert(types.NewVar(0, pub, "V", types.NewPointer(secret)))
	scope.Insert(types.NewTypeName(0, pub, "A", secret)) // an alias
	st := types.NewNamed(types.NewTypeName(0, pub, "S", nil), types.NewStruct([]*types.Var{
		types.NewField(0, pub, "Field", types.NewChan(types.SendRecv, secret), false),
		types.NewField(0, pub, "hidden", secret, false),
	}, nil), nil)
	scope.Insert(st.Obj())
	st.AddMethod(types.NewFunc(0, pub, "M", types.NewSignatureType(v("", st), nil, nil, nil, types.NewTuple(v("", secret)), false)))
	scope.Insert(types.NewVar(0, pub, "unexported", secret))

	var got []string
	for _, l := range leaks(pub, isInternal) {
		got = append(got, fmt.Sprintf("%s %s", l.ident, l.typ))
	}
	want := []string{"sbx.A", "sbx.F", "sbx.S.Field", "sbx.S.M", "sbx.V"}
	var idents []string
	for _, g := range got {
		idents = append(idents, strings.Fields(g)[0])
		if !strings.HasSuffix(g, module+"/internal/x.Secret") {
			t.Errorf("leak %q does not name the internal type", g)
		}
	}
	slices.Sort(idents)
	if !slices.Equal(idents, want) {
		t.Errorf("leaks = %q, want %q", got, want)
	}
}
