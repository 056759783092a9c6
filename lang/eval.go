package lang

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// constContext is the evaluation context for values that must not refer to
// anything: variable defaults and var files. Functions work.
func (l *loader) constContext() *hcl.EvalContext {
	return &hcl.EvalContext{Functions: l.functions()}
}

// context is the evaluation context for everything else: var.* and
// local.* as far as they are known, and the functions.
func (l *loader) context() *hcl.EvalContext {
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var":   objectOf(l.varVals),
			"local": objectOf(l.localVals),
		},
		Functions: l.functions(),
	}
}

func objectOf(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// evalConst evaluates an expression that must not contain references; what
// names it in the error ("A variable's default").
func (l *loader) evalConst(expr hcl.Expression, what string) (cty.Value, bool) {
	if vars := expr.Variables(); len(vars) > 0 {
		for _, t := range vars {
			l.errorf(t.SourceRange(), "Variables not allowed",
				"%s must be a constant value; it cannot refer to %s.", what, traversalString(t))
		}
		return cty.DynamicVal, false
	}
	v, diags := expr.Value(l.constContext())
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		return cty.DynamicVal, false
	}
	return v, true
}

// eval evaluates an expression that may refer to variables and locals. It
// reports false when the value is missing because of an error, reported
// here or earlier (an unknown value stands in for the result of an
// expression that failed).
func (l *loader) eval(expr hcl.Expression) (cty.Value, bool) {
	if !l.checkRefs(expr) {
		return cty.DynamicVal, false
	}
	v, diags := expr.Value(l.context())
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		return cty.DynamicVal, false
	}
	return v, true
}

// checkRefs checks every reference in expr: var.NAME and local.NAME must be
// declared, and nothing else may be referred to in a value. Block
// references (image.agent) are only allowed where a sandbox expects them,
// and those are read without evaluation by blockRef.
func (l *loader) checkRefs(expr hcl.Expression) bool {
	ok := true
	for _, t := range expr.Variables() {
		if !l.checkRef(t) {
			ok = false
		}
	}
	return ok
}

func (l *loader) checkRef(t hcl.Traversal) bool {
	root := t.RootName()
	switch root {
	case "var", "local":
		kind := addrs.Variable
		if root == "local" {
			kind = addrs.Local
		}
		name, ok := traversalName(t)
		if !ok {
			l.errorf(t.SourceRange(), "Invalid reference",
				"A reference to %s must name one %s, as in %s.NAME.", root, kindNoun[kind], root)
			return false
		}
		var names []string
		if kind == addrs.Variable {
			names = slices.Collect(maps.Keys(l.vars))
		} else {
			names = slices.Collect(maps.Keys(l.localsAttr))
		}
		if !slices.Contains(names, name) {
			l.errorf(t.SourceRange(), fmt.Sprintf("Reference to undeclared %s %q", kindNoun[kind], name),
				"%s.%s refers to %s that is not declared.%s%s", root, name, article(kindNoun[kind]),
				didYouMean(name, names, func(s string) string { return root + "." + s }), declareHint(kind, name))
			return false
		}
		return true
	case "image", "egress", "secret", "vfs", "sandbox", "output":
		l.errorf(t.SourceRange(), "Block reference not allowed here",
			"%s refers to a block. Block references are only allowed as a sandbox's image, vfs, egress and secrets arguments; values can refer to var.NAME and local.NAME.", traversalString(t))
		return false
	}
	l.errorf(t.SourceRange(), fmt.Sprintf("Unknown name %q", root),
		"There is nothing named %q here.%s Values can refer to var.NAME and local.NAME; a sandbox refers to blocks as image.NAME, vfs.NAME, egress.NAME and secret.NAME.", root,
		didYouMean(root, []string{"var", "local", "image", "egress", "secret", "vfs"}, func(s string) string { return s + "." + traversalRest(t) }))
	return false
}

func declareHint(kind addrs.Kind, name string) string {
	switch kind {
	case addrs.Variable:
		return fmt.Sprintf(" Declare it with a variable %q {} block.", name)
	case addrs.Local:
		return " Define it in a locals block."
	}
	return ""
}

// varsOf returns the input variables expr refers to, directly or through
// locals, sorted and without repeats.
func (l *loader) varsOf(expr hcl.Expression) []string {
	seen := map[string]bool{}
	visited := map[string]bool{}
	var walk func(hcl.Expression)
	walk = func(e hcl.Expression) {
		for _, t := range e.Variables() {
			name, ok := traversalName(t)
			if !ok {
				continue
			}
			switch t.RootName() {
			case "var":
				seen[name] = true
			case "local":
				if a := l.localsAttr[name]; a != nil && !visited[name] {
					visited[name] = true
					walk(a.Expr)
				}
			}
		}
	}
	walk(expr)
	return slices.Sorted(maps.Keys(seen))
}

// traversalName returns NAME from a KIND.NAME traversal.
func traversalName(t hcl.Traversal) (string, bool) {
	if len(t) < 2 {
		return "", false
	}
	a, ok := t[1].(hcl.TraverseAttr)
	if !ok {
		return "", false
	}
	return a.Name, true
}

// traversalRest renders what follows a traversal's root: "NAME" for
// vars.NAME, or "NAME" when there is nothing to render.
func traversalRest(t hcl.Traversal) string {
	if name, ok := traversalName(t); ok {
		return name
	}
	return "NAME"
}

// traversalString renders a traversal's leading names, e.g. "image.agent".
func traversalString(t hcl.Traversal) string {
	var b strings.Builder
	for i, step := range t {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		default:
			if i == 0 {
				return "this expression"
			}
			return b.String()
		}
	}
	return b.String()
}

// evalLocals evaluates the locals in dependency order, reporting cycles.
func (l *loader) evalLocals() {
	deps := map[string][]string{}
	ok := map[string]bool{}
	for _, name := range l.localOrder {
		a := l.localsAttr[name]
		ok[name] = l.checkRefs(a.Expr)
		for _, t := range a.Expr.Variables() {
			if t.RootName() != "local" {
				continue
			}
			if dep, isName := traversalName(t); isName {
				if _, declared := l.localsAttr[dep]; declared {
					deps[name] = append(deps[name], dep)
				}
			}
		}
	}

	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var stack []string
	var order []string
	inCycle := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		switch state[name] {
		case done:
			return
		case visiting:
			i := len(stack) - 1
			for stack[i] != name {
				i--
			}
			cycle := append(append([]string{}, stack[i:]...), name)
			for _, n := range cycle {
				inCycle[n] = true
			}
			steps := make([]string, len(cycle))
			for j, n := range cycle {
				steps[j] = "local." + n
			}
			l.errorf(l.localsAttr[cycle[0]].NameRange, "Cycle in local values",
				"The local values refer to each other in a loop: %s. A local value cannot depend on itself.", strings.Join(steps, " → "))
			return
		}
		state[name] = visiting
		stack = append(stack, name)
		for _, dep := range deps[name] {
			visit(dep)
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		order = append(order, name)
	}
	for _, name := range l.localOrder {
		visit(name)
	}

	for _, name := range order {
		a := l.localsAttr[name]
		lv := &Local{Name: name, DeclRange: a.Range}
		l.cfg.Locals[name] = lv
		if !ok[name] || inCycle[name] {
			l.localVals[name] = cty.DynamicVal
			continue
		}
		v, diags := a.Expr.Value(l.context())
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			v = cty.DynamicVal
		}
		l.localVals[name] = v
		if v.IsWhollyKnown() {
			lv.Value = goValue(v)
		}
	}
}

// goValue converts a known cty value to plain Go values that encode to
// JSON naturally: string, bool, int64 (whole numbers that fit) or float64,
// []any, map[string]any, and nil for null.
func goValue(v cty.Value) any {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return v.AsString()
	case ty == cty.Bool:
		return v.True()
	case ty == cty.Number:
		f := v.AsBigFloat()
		if f.IsInt() {
			if i, acc := f.Int64(); acc == big.Exact {
				return i
			}
		}
		x, _ := f.Float64()
		return x
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		out := make([]any, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, goValue(e))
		}
		return out
	case ty.IsMapType() || ty.IsObjectType():
		out := make(map[string]any, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = goValue(e)
		}
		return out
	}
	return nil
}

// The attr* functions evaluate one optional attribute to a Go type. They
// report false when the attribute is absent, null, or its value is in
// error (the error has then been reported), so the caller keeps its
// default.

func (l *loader) attrValue(a *hcl.Attribute, ty cty.Type, tyName string) (cty.Value, bool) {
	if a == nil {
		return cty.NilVal, false
	}
	v, ok := l.eval(a.Expr)
	if !ok || v.IsNull() {
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		l.errorf(a.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: %s required (%s).", a.Name, tyName, convertErrorText(err))
		return cty.NilVal, false
	}
	if cv.IsNull() {
		return cty.NilVal, false
	}
	return cv, true
}

func (l *loader) attrString(a *hcl.Attribute) (string, bool) {
	v, ok := l.attrValue(a, cty.String, "string")
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

// toString converts an evaluated value of attribute a to a string.
func (l *loader) toString(v cty.Value, a *hcl.Attribute, name string) (string, bool) {
	cv, err := convert.Convert(v, cty.String)
	if err != nil || cv.IsNull() {
		l.errorf(a.Expr.Range(), "Incorrect attribute value type", "Inappropriate value for attribute %q: string required.", name)
		return "", false
	}
	return cv.AsString(), true
}

func (l *loader) attrBool(a *hcl.Attribute) (bool, bool) {
	v, ok := l.attrValue(a, cty.Bool, "bool")
	if !ok {
		return false, false
	}
	return v.True(), true
}

// attrInt evaluates a whole number in [min, max].
func (l *loader) attrInt(a *hcl.Attribute, min, max int64) (int64, bool) {
	v, ok := l.attrValue(a, cty.Number, "number")
	if !ok {
		return 0, false
	}
	f := v.AsBigFloat()
	i, acc := f.Int64()
	if !f.IsInt() || acc != big.Exact || i < min || i > max {
		l.errorf(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", a.Name),
			"%s must be a whole number from %d to %d.", a.Name, min, max)
		return 0, false
	}
	return i, true
}

// item is one element of a list or map attribute with the range it was
// written at (the whole attribute's range when the list was computed).
type item struct {
	Key      string // map key; empty for list elements
	Value    string
	Range    hcl.Range // the element's (or map value's) range
	KeyRange hcl.Range
}

// attrStrings evaluates a list of strings, keeping each element's range
// when the list is written out literally.
func (l *loader) attrStrings(a *hcl.Attribute) ([]item, bool) {
	v, ok := l.attrValue(a, cty.List(cty.String), "list of strings")
	if !ok {
		return nil, false
	}
	var exprs []hclsyntax.Expression
	if tc, isTuple := a.Expr.(*hclsyntax.TupleConsExpr); isTuple && len(tc.Exprs) == v.LengthInt() {
		exprs = tc.Exprs
	}
	var out []item
	for i, it := 0, v.ElementIterator(); it.Next(); i++ {
		_, e := it.Element()
		if e.IsNull() {
			l.errorf(a.Expr.Range(), "Invalid list element", "The list %q contains null.", a.Name)
			return nil, false
		}
		r := a.Expr.Range()
		if exprs != nil {
			r = exprs[i].Range()
		}
		out = append(out, item{Value: e.AsString(), Range: r, KeyRange: r})
	}
	return out, true
}

// attrStringMap evaluates a map of strings, sorted by key, keeping each
// entry's ranges when the map is written out literally.
func (l *loader) attrStringMap(a *hcl.Attribute) ([]item, bool) {
	v, ok := l.attrValue(a, cty.Map(cty.String), "map of strings")
	if !ok {
		return nil, false
	}
	keyRanges := map[string][2]hcl.Range{}
	if oc, isObj := a.Expr.(*hclsyntax.ObjectConsExpr); isObj {
		ctx := l.context()
		for _, it := range oc.Items {
			k, diags := it.KeyExpr.Value(ctx)
			if diags.HasErrors() || !k.IsWhollyKnown() || k.IsNull() {
				continue
			}
			if ks, err := convert.Convert(k, cty.String); err == nil {
				keyRanges[ks.AsString()] = [2]hcl.Range{it.KeyExpr.Range(), it.ValueExpr.Range()}
			}
		}
	}
	var out []item
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() {
			l.errorf(a.Expr.Range(), "Invalid map element", "The map %q has a null value for %q.", a.Name, k.AsString())
			return nil, false
		}
		kr, vr := a.Expr.Range(), a.Expr.Range()
		if r, found := keyRanges[k.AsString()]; found {
			kr, vr = r[0], r[1]
		}
		out = append(out, item{Key: k.AsString(), Value: e.AsString(), Range: vr, KeyRange: kr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, true
}
