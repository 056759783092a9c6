package bindings

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/sbx-dev/sbx/policy"
)

// File is a parsed bindings file.
type File struct {
	// Path is the file's path, absolute. A File whose file does not
	// exist has it too: it is where bindings would be added.
	Path string
	// Exists is false when there is no file at Path (no bindings).
	Exists bool
	// Bindings are the file's bindings, in the order written.
	Bindings []*Binding
	// HCL is the parsed file, for diagnostic snippets; nil when the
	// file does not exist.
	HCL *hcl.File
	// home is what "~/" stood for in the file.
	home string
}

// ShortPath is the file's path for people: with "~" for the home
// directory when it is under it.
func (f *File) ShortPath() string {
	if f == nil {
		return ""
	}
	if f.home != "" && f.home != "/" {
		if rest, ok := strings.CutPrefix(f.Path, strings.TrimSuffix(f.home, "/")+"/"); ok {
			return "~/" + rest
		}
	}
	return f.Path
}

// Binding is one binding block: where the value of the secret of the
// block's name is read, for the configurations its scope covers.
type Binding struct {
	// Secret is the secret block's name the binding is for.
	Secret string
	// Source is the source as written: "env:NAME", "file:PATH" or
	// "command:CMD".
	Source string
	// Config is the directory, absolute and clean, whose configurations
	// (there or below) the binding is for; empty means every
	// configuration.
	Config string
	// DeclRange is the block's header, for file:line.
	DeclRange hcl.Range

	// resolve is Source as package secretsrc reads it: a file path
	// with "~/" expanded against the file's home.
	resolve string
}

// Options configure Parse and Load.
type Options struct {
	// Home is the directory "~/" stands for in scopes and file paths;
	// empty means the home directory of this process's user.
	Home string
	// Required makes a missing file an error (Load), as for a file the
	// user named (SBX_BINDINGS).
	Required bool
}

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "binding", LabelNames: []string{"secret"}}},
}

var bindingSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true},
		{Name: "config"},
	},
}

// Parse parses src, the content of the bindings file at path (absolute),
// without touching the file system. Bindings with errors are left out;
// the diagnostics say why, at file:line.
func Parse(src []byte, path string, opts Options) (*File, hcl.Diagnostics) {
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	f := &File{Path: path, Exists: true, home: opts.Home}
	hf, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	f.HCL = hf
	if diags.HasErrors() {
		return f, diags
	}
	content, ds := hf.Body.Content(fileSchema)
	diags = append(diags, ds...)
	seen := map[[2]string]*Binding{}
	for _, blk := range content.Blocks {
		b, ds := parseBinding(blk, f.home)
		diags = append(diags, ds...)
		if b == nil {
			continue
		}
		key := [2]string{b.Secret, b.Config}
		if first := seen[key]; first != nil {
			scope := "every configuration"
			if b.Config != "" {
				scope = "configurations in " + b.Config
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate binding",
				Detail: fmt.Sprintf("Secret %q is already bound for %s at %s:%d; a secret has one binding per scope.",
					b.Secret, scope, first.DeclRange.Filename, first.DeclRange.Start.Line),
				Subject: blk.DefRange.Ptr(),
			})
			continue
		}
		seen[key] = b
		f.Bindings = append(f.Bindings, b)
	}
	return f, diags
}

func parseBinding(blk *hcl.Block, home string) (*Binding, hcl.Diagnostics) {
	content, diags := blk.Body.Content(bindingSchema)
	name := blk.Labels[0]
	if !hclsyntax.ValidIdentifier(name) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid secret name",
			Detail:   fmt.Sprintf("%q is not the name of a secret block: names are letters, digits, underscores and dashes, starting with a letter.", name),
			Subject:  blk.LabelRanges[0].Ptr(),
		})
	}
	b := &Binding{Secret: name, DeclRange: blk.DefRange}
	if a := content.Attributes["source"]; a != nil {
		s, ds := stringAttr(a)
		diags = append(diags, ds...)
		if !ds.HasErrors() {
			resolved, err := checkSource(s, home)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid secret source",
					Detail:   err.Error() + ".",
					Subject:  a.Expr.Range().Ptr(),
				})
			}
			b.Source, b.resolve = s, resolved
		}
	}
	if a := content.Attributes["config"]; a != nil {
		s, ds := stringAttr(a)
		diags = append(diags, ds...)
		if !ds.HasErrors() {
			dir, err := expandHome(s, home)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid configuration directory",
					Detail:   fmt.Sprintf("config %q: %v.", s, err),
					Subject:  a.Expr.Range().Ptr(),
				})
			}
			b.Config = dir
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return b, diags
}

// stringAttr evaluates a as a literal string: the file is data, with no
// variables or functions.
func stringAttr(a *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return "", diags
	}
	if v.IsNull() || v.Type() != cty.String {
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("%s must be a string.", a.Name),
			Subject:  a.Expr.Range().Ptr(),
		}}
	}
	return v.AsString(), nil
}

// checkSource checks a binding's source (policy.CheckSecretSource) and
// returns it as secretsrc reads it. A file path must be absolute or
// start with "~/": a binding is read for configurations anywhere, and a
// relative path would name a file of whichever checkout it was read for.
func checkSource(s, home string) (string, error) {
	if err := policy.CheckSecretSource(s); err != nil {
		return "", err
	}
	path, ok := strings.CutPrefix(s, "file:")
	if !ok {
		return s, nil
	}
	if !strings.HasPrefix(path, "~/") && !filepath.IsAbs(path) {
		return "", fmt.Errorf("source %q: a binding's file must be an absolute path or start with ~/", s)
	}
	abs, err := expandHome(path, home)
	if err != nil {
		return "", fmt.Errorf("source %q: %v", s, err)
	}
	return "file:" + abs, nil
}

// expandHome returns dir, absolute or starting with "~" (the home
// directory), as an absolute clean path.
func expandHome(dir, home string) (string, error) {
	if dir == "~" || strings.HasPrefix(dir, "~/") {
		if home == "" {
			return "", fmt.Errorf("no home directory is known for ~")
		}
		return filepath.Join(home, dir[1:]), nil
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("write an absolute directory, or one starting with ~/")
	}
	return filepath.Clean(dir), nil
}
