package bindings

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/sbx-dev/sbx/policy"
)

// From says where a chosen source is written.
type From string

// Where a source comes from.
const (
	FromSpec     From = "spec"     // the secret block's source attribute
	FromBindings From = "bindings" // a binding of the user's bindings file
)

// Choice is the source a secret's value is read from on this host.
type Choice struct {
	// Secret is the secret block's name.
	Secret string
	// Source is what package secretsrc reads: "env:NAME", "file:PATH"
	// or "command:CMD" ("~/" in a binding's file path expanded).
	// Empty when Err is set.
	Source string
	// Written is the source as its spec or binding writes it, for
	// people; empty when Err is set.
	Written string
	// From says whether the spec or a binding wrote it; Origin where:
	// the secret block (Block "secret.NAME", File relative to the
	// configuration directory) or the binding (Block "binding.NAME",
	// File the bindings file's path).
	From   From
	Origin policy.Origin
	// Dir is where a relative file path is read from and a command
	// runs: the configuration directory for the spec's sources, the
	// bindings file's directory for a binding's (no file of the
	// checkout can steer a command the user bound).
	Dir string
	// Err, an *UnboundError, says why the secret has no source it may
	// be read from; starting a sandbox that uses it fails with it.
	Err error
}

// Kind is the kind of the chosen source: "env", "file" or "command";
// empty when there is none.
func (c Choice) Kind() string {
	kind, _, _ := strings.Cut(c.Source, ":")
	return kind
}

// For returns the binding of the secret called secret for the
// configuration in configDir (absolute): of the bindings of that name
// whose scope contains configDir (or one it resolves to through
// symbolic links), the one with the longest scope, an unscoped one
// last; nil when none. A nil File has no bindings.
func (f *File) For(secret, configDir string) *Binding {
	if f == nil {
		return nil
	}
	dirs := []string{filepath.Clean(configDir)}
	if real, err := filepath.EvalSymlinks(configDir); err == nil && real != dirs[0] {
		dirs = append(dirs, real)
	}
	var best *Binding
	for _, b := range f.Bindings {
		if b.Secret != secret || !covers(b.Config, dirs) {
			continue
		}
		if best == nil || len(b.Config) > len(best.Config) {
			best = b
		}
	}
	return best
}

// covers reports whether the scope (empty: every directory) contains
// one of dirs, as written or as it resolves.
func covers(scope string, dirs []string) bool {
	if scope == "" {
		return true
	}
	scopes := []string{scope}
	if real, err := filepath.EvalSymlinks(scope); err == nil && real != scope {
		scopes = append(scopes, real)
	}
	for _, s := range scopes {
		for _, d := range dirs {
			if d == s || strings.HasPrefix(d, strings.TrimSuffix(s, string(filepath.Separator))+string(filepath.Separator)) {
				return true
			}
		}
	}
	return false
}

// Choose returns the source the value of secret s, of the configuration
// in configDir (absolute), is read from: the binding For returns, else
// the spec's env: or file: source. A spec's command: source is never
// chosen — a checkout's spec could otherwise run any command on the host
// of whoever starts its sandboxes — and neither is anything for a secret
// with no source; then Err says what to add to f. Choose reads no value
// and runs nothing.
//
// The spec's env: and file: sources are kept: they run nothing, only
// read a value, and the value goes only to the secret's hosts, which
// must be allowed by the sandbox's egress (both in the plan, which shows
// a changed source as widening). f may be nil: no bindings.
func Choose(f *File, configDir string, s policy.SecretBinding) Choice {
	if b := f.For(s.Name, configDir); b != nil {
		return Choice{
			Secret:  s.Name,
			Source:  b.resolve,
			Written: b.Source,
			From:    FromBindings,
			Origin:  policy.Origin{Block: "binding." + b.Secret, File: b.DeclRange.Filename, Line: b.DeclRange.Start.Line},
			Dir:     filepath.Dir(b.DeclRange.Filename),
		}
	}
	c := Choice{Secret: s.Name, From: FromSpec, Origin: s.Origin, Dir: configDir}
	kind, _, _ := strings.Cut(s.Source, ":")
	if s.Source == "" || kind == "command" {
		c.From = ""
		path := ""
		if f != nil {
			path = f.Path
		}
		c.Err = &UnboundError{Secret: s.Name, Origin: s.Origin, SpecSource: s.Source, Path: path, ConfigDir: configDir}
		return c
	}
	c.Source, c.Written = s.Source, s.Source
	return c
}

// ChooseAll chooses the source of each secret of p (Choose).
func ChooseAll(f *File, configDir string, p policy.Sandbox) []Choice {
	out := make([]Choice, 0, len(p.Secrets))
	for _, s := range p.Secrets {
		out = append(out, Choose(f, configDir, s))
	}
	return out
}

// UnboundError is the error for a secret whose value has no source sbx
// may read: the spec names a command, which sbx never runs from a spec,
// or nothing, and no binding covers the configuration.
type UnboundError struct {
	Secret string
	// Origin is the secret block's.
	Origin policy.Origin
	// SpecSource is the spec's source ("command:…"), or empty.
	SpecSource string
	// Path is the bindings file's path; empty when not known.
	Path string
	// ConfigDir is the configuration's directory.
	ConfigDir string
}

func (e *UnboundError) Error() string {
	where := ""
	if e.Origin.File != "" {
		where = fmt.Sprintf(" (%s:%d)", e.Origin.File, e.Origin.Line)
	}
	path := e.Path
	if path == "" {
		path = "your bindings file ($" + EnvFile + ", else ~/.config/sbx/bindings.hcl)"
	}
	var b strings.Builder
	if e.SpecSource != "" {
		fmt.Fprintf(&b, "secret.%s%s: sbx does not run the command the spec names as its source: "+
			"a command runs only from your bindings file, never from a spec, which a checkout could change to run anything on this host. "+
			"Nothing in %s binds secret %s for this configuration. Read the command, and if you trust it, add to %s:\n\n",
			e.Secret, where, path, e.Secret, path)
	} else {
		fmt.Fprintf(&b, "secret.%s%s has no source: the spec names none, and nothing in %s binds it for this configuration. Add to %s:\n\n",
			e.Secret, where, path, path)
	}
	b.WriteString(e.Suggestion())
	return strings.TrimRight(b.String(), "\n")
}

// Suggestion is the binding block that binds the secret for the
// configuration: the spec's command when it names one (quoted as HCL
// quotes it, so the text is inert), else a placeholder source.
func (e *UnboundError) Suggestion() string {
	source := "env:NAME"
	if e.SpecSource != "" {
		source = e.SpecSource
	}
	f := hclwrite.NewEmptyFile()
	body := f.Body().AppendNewBlock("binding", []string{e.Secret}).Body()
	body.SetAttributeValue("source", cty.StringVal(source))
	if e.ConfigDir != "" {
		body.SetAttributeValue("config", cty.StringVal(e.ConfigDir))
	}
	out := string(hclwrite.Format(f.Bytes()))
	if e.SpecSource == "" {
		out = strings.Replace(out, `"env:NAME"`, `"env:NAME" # or file:PATH, or command:CMD`, 1)
	}
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// Check returns the errors of the secrets of p that have no source sbx
// may read for the configuration in configDir (Choose), joined; nil when
// every secret has one. Callers check before they build or start
// anything, so that a sandbox that could not start fails early.
func Check(f *File, configDir string, p policy.Sandbox) error {
	var errs []error
	for _, c := range ChooseAll(f, configDir, p) {
		if c.Err != nil {
			errs = append(errs, c.Err)
		}
	}
	return errors.Join(errs...)
}
