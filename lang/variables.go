package lang

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// varDecl is a declared variable while its value is worked out.
type varDecl struct {
	v           *Variable
	ty          cty.Type // cty.DynamicPseudoType when no type is declared
	def         cty.Value
	defRange    hcl.Range
	validations []varValidation
	val         cty.Value // cty.NilVal until set
}

type varValidation struct {
	cond hcl.Expression
	msg  hcl.Expression
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "default"},
		{Name: "description"},
		{Name: "type"},
		{Name: "sensitive"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

// declareVariables decodes the variable blocks and their defaults.
func (l *loader) declareVariables() {
	for _, b := range l.blocks[addrs.Variable] {
		content, diags := b.Body.Content(variableSchema)
		l.diags = append(l.diags, diags...)
		d := &varDecl{
			v:  &Variable{Name: b.Labels[0], DeclRange: b.DefRange, Type: "any"},
			ty: cty.DynamicPseudoType,
		}
		l.vars[d.v.Name] = d
		l.cfg.Variables[d.v.Name] = d.v
		if a := content.Attributes["description"]; a != nil {
			if v, ok := l.evalConst(a.Expr, "A variable's description"); ok {
				if s, ok := l.toString(v, a, "description"); ok {
					d.v.Description = s
				}
			}
		}
		if a := content.Attributes["sensitive"]; a != nil {
			if v, ok := l.evalConst(a.Expr, "A variable's sensitive flag"); ok {
				if bv, err := convert.Convert(v, cty.Bool); err == nil && !bv.IsNull() {
					d.v.Sensitive = bv.True()
				} else {
					l.errorf(a.Expr.Range(), "Incorrect attribute value type", "Inappropriate value for attribute \"sensitive\": bool required.")
				}
			}
		}
		if a := content.Attributes["type"]; a != nil {
			ty, diags := typeexpr.TypeConstraint(a.Expr)
			l.diags = append(l.diags, diags...)
			if !diags.HasErrors() {
				d.ty = ty
				d.v.Type = typeexpr.TypeString(ty)
			} else {
				// The variable cannot be used; say nothing more about it.
				d.def = cty.DynamicVal
			}
		}
		if a := content.Attributes["default"]; a != nil {
			d.defRange = a.Expr.Range()
			if v, ok := l.evalConst(a.Expr, "A variable's default"); ok {
				cv, err := convert.Convert(v, d.ty)
				if err != nil {
					l.errorf(a.Expr.Range(), "Invalid default value for variable",
						"The default value of var.%s does not match its type %s: %s.", d.v.Name, d.v.Type, convertErrorText(err))
					d.def = cty.DynamicVal
				} else {
					d.def = cv
				}
			} else {
				// Mark the variable as set so that no "missing value"
				// error follows the one already reported.
				d.def = cty.DynamicVal
			}
		}
		for _, vb := range content.Blocks {
			vc, diags := vb.Body.Content(validationSchema)
			l.diags = append(l.diags, diags...)
			if c, m := vc.Attributes["condition"], vc.Attributes["error_message"]; c != nil && m != nil {
				d.validations = append(d.validations, varValidation{cond: c.Expr, msg: m.Expr})
			}
		}
	}
}

// assignVariables sets every variable's value. Later sources override
// earlier ones: the default, then SBX_VAR_ environment variables, then
// -var-file files in order, then -var flags in order.
func (l *loader) assignVariables(opts Options) {
	for _, d := range l.vars {
		if d.def != cty.NilVal {
			d.val, d.v.Set = d.def, "default"
		}
	}
	for _, kv := range opts.Environ {
		k, raw, ok := strings.Cut(kv, "=")
		name, isVar := strings.CutPrefix(k, envVarPrefix)
		if !ok || !isVar {
			continue
		}
		// Environment variables are shared by every configuration a user
		// works on, so one meant for another configuration is no error.
		d := l.vars[name]
		if d == nil {
			continue
		}
		d.val, d.v.Set = l.varFromString(d, raw, "environment variable "+k), "env"
	}
	for _, path := range opts.VarFiles {
		l.readVarFile(path)
	}
	for _, arg := range opts.Vars {
		name, raw, ok := strings.Cut(arg, "=")
		if !ok || name == "" {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("The option -var %q is not of the form NAME=VALUE.", arg),
			})
			continue
		}
		d := l.vars[name]
		if d == nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("A -var option sets %q, but no variable %q is declared. Declare it with a variable %q {} block.", name, name, name),
			})
			continue
		}
		d.val, d.v.Set = l.varFromString(d, raw, "-var "+name), "flag"
	}

	names := make([]string, 0, len(l.vars))
	for name := range l.vars {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d := l.vars[name]
		if d.val == cty.NilVal {
			l.errorf(d.v.DeclRange, fmt.Sprintf("No value for required variable %q", name),
				"var.%s has no default, so it must be set with -var %s=VALUE, a -var-file, or the environment variable %s%s.", name, name, envVarPrefix, name)
			d.val = cty.DynamicVal
		}
		l.varVals[name] = d.val
		if d.val.IsWhollyKnown() {
			d.v.Value = goValue(d.val)
		}
	}
	for _, name := range names {
		l.validateVariable(l.vars[name])
	}
}

// varFromString converts a value given as a string on the command line or
// in the environment to the variable's type. Strings and other primitive
// types take the text as it is; lists, maps and objects are parsed as HCL
// expressions, as in -var 'hosts=["a.example.com"]'. An invalid value is
// reported and gives an unknown value, so that nothing else is reported
// about the variable.
func (l *loader) varFromString(d *varDecl, raw, what string) cty.Value {
	invalid := func(detail string, args ...any) cty.Value {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf(detail, args...),
		})
		return cty.DynamicVal
	}
	var v cty.Value
	if d.ty.IsPrimitiveType() || d.ty == cty.DynamicPseudoType {
		v = cty.StringVal(raw)
	} else {
		expr, diags := hclsyntax.ParseExpression([]byte(raw), fmt.Sprintf("<value for var.%s>", d.v.Name), hcl.InitialPos)
		if diags.HasErrors() || len(expr.Variables()) > 0 {
			return invalid("The value given by %s for var.%s of type %s must be written in HCL syntax, as in [\"a\", \"b\"] or {key = \"value\"}.", what, d.v.Name, d.v.Type)
		}
		var diags2 hcl.Diagnostics
		v, diags2 = expr.Value(l.constContext())
		if diags2.HasErrors() || !v.IsWhollyKnown() {
			return invalid("The value given by %s for var.%s cannot be evaluated as a constant.", what, d.v.Name)
		}
	}
	cv, err := convert.Convert(v, d.ty)
	if err != nil {
		return invalid("The value given by %s does not match the type of var.%s: %s.", what, d.v.Name, convertErrorText(err))
	}
	return cv
}

// readVarFile applies one -var-file.
func (l *loader) readVarFile(path string) {
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		f, diags = l.parser.ParseJSONFile(path)
	} else {
		f, diags = l.parser.ParseHCLFile(path)
	}
	l.diags = append(l.diags, diags...)
	if f == nil {
		return
	}
	l.cfg.Sources[path] = f
	attrs, diags := f.Body.JustAttributes()
	l.diags = append(l.diags, diags...)
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := attrs[name]
		d := l.vars[name]
		if d == nil {
			// A var file may be shared by several configurations, so an
			// unknown name is a warning, as in Terraform.
			l.warnf(a.NameRange, "Value for undeclared variable",
				"The var file %s sets %q, but no variable %q is declared in this configuration; the value is ignored.", filepath.Base(path), name, name)
			continue
		}
		v, ok := l.evalConst(a.Expr, "A value in a var file")
		if !ok {
			continue
		}
		cv, err := convert.Convert(v, d.ty)
		if err != nil {
			l.errorf(a.Expr.Range(), "Invalid value for variable",
				"The value for var.%s does not match its type %s: %s.", name, d.v.Type, convertErrorText(err))
			continue
		}
		d.val, d.v.Set = cv, "file:"+path
	}
}

// validateVariable checks a variable's validation blocks. A condition may
// refer only to the variable itself.
func (l *loader) validateVariable(d *varDecl) {
	if !d.val.IsWhollyKnown() {
		return
	}
	ctx := l.constContext()
	ctx.Variables = map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{d.v.Name: d.val})}
	for _, vv := range d.validations {
		ok := true
		for _, t := range vv.cond.Variables() {
			if t.RootName() == "var" && len(t) >= 2 {
				if a, isAttr := t[1].(hcl.TraverseAttr); isAttr && a.Name == d.v.Name {
					continue
				}
			}
			l.errorf(t.SourceRange(), "Invalid reference in variable validation",
				"The condition of a validation block of var.%s may refer only to var.%s.", d.v.Name, d.v.Name)
			ok = false
		}
		if !ok {
			continue
		}
		res, diags := vv.cond.Value(ctx)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() || !res.IsWhollyKnown() {
			continue
		}
		bv, err := convert.Convert(res, cty.Bool)
		if err != nil || bv.IsNull() {
			l.errorf(vv.cond.Range(), "Invalid validation condition", "The condition must be true or false.")
			continue
		}
		if bv.True() {
			continue
		}
		msg := "The value does not meet the variable's validation rule."
		if mv, diags := vv.msg.Value(ctx); !diags.HasErrors() && mv.IsWhollyKnown() && mv.Type() == cty.String && !mv.IsNull() {
			msg = mv.AsString()
		}
		l.errorf(vv.cond.Range(), "Invalid value for variable", "%s (var.%s was set by %s.)", msg, d.v.Name, d.v.Set)
	}
}

// convertErrorText renders a cty conversion error without the value, which
// may be sensitive.
func convertErrorText(err error) string {
	var pe cty.PathError
	if e, ok := err.(cty.PathError); ok {
		pe = e
		if len(pe.Path) > 0 {
			return fmt.Sprintf("at %s: %s", pathString(pe.Path), pe.Error())
		}
	}
	return err.Error()
}

func pathString(p cty.Path) string {
	var b strings.Builder
	for _, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			b.WriteString("." + s.Name)
		case cty.IndexStep:
			if s.Key.Type() == cty.String {
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				b.WriteString("[" + s.Key.AsBigFloat().String() + "]")
			}
		}
	}
	return b.String()
}
