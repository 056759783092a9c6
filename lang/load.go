package lang

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/policy"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Options are the inputs to Load that do not come from the configuration
// directory itself.
type Options struct {
	// Vars are -var "name=value" arguments in command-line order; a later
	// one wins over an earlier one for the same name.
	Vars []string
	// VarFiles are -var-file paths in command-line order. A var file holds
	// "name = value" lines in HCL syntax, or, if its name ends in .json, a
	// JSON object.
	VarFiles []string
	// Environ is the environment in os.Environ form. Only SBX_VAR_name
	// entries are read: they set var.name.
	Environ []string
}

// lockFileName is the lock file kept in a configuration directory. It is
// HCL but not part of the configuration, so Load skips it.
const lockFileName = "sbx.lock.hcl"

// varFileSuffix marks a var file kept beside the configuration: Load skips
// it, and -var-file can name it.
const varFileSuffix = ".vars.hcl"

// envVarPrefix is the prefix of environment variables that set variables.
const envVarPrefix = "SBX_VAR_"

// Load reads every *.hcl file directly in dir (sorted by name; not
// subdirectories, not the lock file sbx.lock.hcl, not var files named
// *.vars.hcl) as one configuration, applies opts, evaluates and validates
// it. A file is read only if it is, or links to, a regular file inside dir
// (see "Files" in the package documentation).
//
// The returned Config is never nil, and its Sources are set even when
// loading fails, so that diagnostics can be printed with source snippets.
// When there are errors the Config holds whatever could be decoded and
// must not be used to build or run anything.
//
// Diagnostic file names are the file's path joined to dir as given, so a
// relative dir gives relative names.
func Load(dir string, opts Options) (*Config, hcl.Diagnostics) {
	l := newLoader(dir)
	l.load(opts)
	if l.root != nil {
		l.root.Close()
	}
	return l.cfg, l.diags
}

type loader struct {
	dir    string // as given; diagnostic file names are joined to it
	cfg    *Config
	parser *hclparse.Parser
	diags  hcl.Diagnostics
	root   *os.Root // Config.Dir, for file(); nil if it cannot be opened

	relNames map[string]string // diagnostic file name -> name relative to Dir

	// blocks are the top-level blocks by kind in file order; first is the
	// first declaration of each name.
	blocks     map[addrs.Kind][]*hcl.Block
	first      map[addrs.Ref]*hcl.Block
	localsAttr map[string]*hcl.Attribute
	localOrder []string

	funcs map[string]function.Function // built once, by functions()

	vars      map[string]*varDecl
	varVals   map[string]cty.Value
	localVals map[string]cty.Value

	// incomplete marks blocks whose decoding reported errors, so that
	// cross-block checks do not pile follow-on errors onto them.
	incomplete map[addrs.Ref]bool
	// mountOwners records where each mount's owner was set, by vfs name
	// and guest path, for the user checks made per sandbox.
	mountOwners map[string]map[string]hcl.Range
	// imageEnv and secretEnv record where each image's env names and each
	// secret's env are written, for the forbid_env checks made per
	// sandbox.
	imageEnv  map[string][]item
	secretEnv map[string]hcl.Range
}

func newLoader(dir string) *loader {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = filepath.Clean(dir)
	}
	return &loader{
		dir:    dir,
		parser: hclparse.NewParser(),
		cfg: &Config{
			Dir:       abs,
			Sources:   map[string]*hcl.File{},
			Variables: map[string]*Variable{},
			Locals:    map[string]*Local{},
			Images:    map[string]*Image{},
			Egress:    map[string]*Egress{},
			Secrets:   map[string]*Secret{},
			VFS:       map[string]*VFS{},
			Sandboxes: map[string]*Sandbox{},
			Outputs:   map[string]*Output{},
		},
		relNames:    map[string]string{},
		blocks:      map[addrs.Kind][]*hcl.Block{},
		first:       map[addrs.Ref]*hcl.Block{},
		localsAttr:  map[string]*hcl.Attribute{},
		vars:        map[string]*varDecl{},
		varVals:     map[string]cty.Value{},
		localVals:   map[string]cty.Value{},
		incomplete:  map[addrs.Ref]bool{},
		mountOwners: map[string]map[string]hcl.Range{},
		imageEnv:    map[string][]item{},
		secretEnv:   map[string]hcl.Range{},
	}
}

func (l *loader) load(opts Options) {
	if !l.readFiles() {
		return
	}
	l.declareVariables()
	l.assignVariables(opts)
	l.evalLocals()

	for _, b := range l.blocks[addrs.Image] {
		l.track(addrs.Ref{Kind: addrs.Image, Name: b.Labels[0]}, func() { l.decodeImage(b) })
	}
	for _, b := range l.blocks[addrs.Egress] {
		l.track(addrs.Ref{Kind: addrs.Egress, Name: b.Labels[0]}, func() { l.decodeEgress(b) })
	}
	for _, b := range l.blocks[addrs.Secret] {
		l.track(addrs.Ref{Kind: addrs.Secret, Name: b.Labels[0]}, func() { l.decodeSecret(b) })
	}
	for _, b := range l.blocks[addrs.VFS] {
		l.track(addrs.Ref{Kind: addrs.VFS, Name: b.Labels[0]}, func() { l.decodeVFS(b) })
	}
	for _, b := range l.blocks[addrs.Sandbox] {
		l.track(addrs.Ref{Kind: addrs.Sandbox, Name: b.Labels[0]}, func() { l.decodeSandbox(b) })
	}
	for _, b := range l.blocks[addrs.Output] {
		l.decodeOutput(b)
	}
}

// track runs decode and marks ref incomplete if it reported errors.
func (l *loader) track(ref addrs.Ref, decode func()) {
	n := len(l.diags)
	decode()
	if l.diags[n:].HasErrors() {
		l.incomplete[ref] = true
	}
}

// readFiles opens the configuration directory, parses the configuration
// files and sorts their top-level blocks by kind. It reports whether there
// is anything to go on with.
func (l *loader) readFiles() bool {
	root, err := os.OpenRoot(l.dir)
	var entries []os.DirEntry
	if err == nil {
		l.root = root
		entries, err = readDir(root)
	}
	if err != nil {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration directory",
			Detail:   fmt.Sprintf("Reading %s: %v.", l.dir, pathErrText(err)),
		})
		return false
	}
	for _, e := range entries {
		name := e.Name()
		// A directory named *.hcl is not a file; anything else with a
		// configuration file's name is read (and refused by readSource
		// unless it is, or links to, a regular file inside the directory).
		if !isConfigFile(name) || e.IsDir() {
			continue
		}
		l.cfg.Files = append(l.cfg.Files, name)
	}
	sort.Strings(l.cfg.Files)
	if len(l.cfg.Files) == 0 {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No configuration files",
			Detail:   fmt.Sprintf("The directory %s holds no *.hcl files.", l.dir),
		})
		return false
	}
	for _, name := range l.cfg.Files {
		diagName := filepath.Join(l.dir, name)
		l.relNames[diagName] = name
		src, err := l.readSource(name)
		if err != nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read configuration file",
				Detail:   fmt.Sprintf("Reading %s: %v.", diagName, err),
			})
			continue
		}
		f, diags := l.parser.ParseHCL(src, diagName)
		l.diags = append(l.diags, diags...)
		if f == nil {
			continue
		}
		l.cfg.Sources[diagName] = f
		l.collect(f)
	}
	return true
}

// readDir lists the directory root is open on.
func readDir(root *os.Root) ([]os.DirEntry, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// readSource reads the configuration file name, which must be a regular
// file inside the configuration directory: a symbolic link is followed
// only while it stays inside the directory (os.Root), and a link that
// leaves it, or that ends at anything but a regular file (a named pipe, a
// device, a directory), is an error that names the file and quotes
// nothing of what it points at. The directory may come from an untrusted
// checkout, and a diagnostic prints source lines.
func (l *loader) readSource(name string) ([]byte, error) {
	fi, err := l.root.Stat(name)
	if err != nil {
		if target, lerr := os.Readlink(filepath.Join(l.dir, name)); lerr == nil {
			return nil, fmt.Errorf("it is a symbolic link to %q, which %v", target, linkErrText(err))
		}
		return nil, pathErrText(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("it is not a regular file (%s)", describeMode(fi.Mode()))
	}
	f, err := l.root.Open(name)
	if err != nil {
		return nil, pathErrText(err)
	}
	defer f.Close()
	got, err := f.Stat()
	if err != nil {
		return nil, pathErrText(err)
	}
	if !os.SameFile(fi, got) {
		return nil, fmt.Errorf("it changed while it was being opened")
	}
	src, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, pathErrText(err)
	}
	if len(src) > maxFileSize {
		return nil, fmt.Errorf("it is larger than %s", FormatSize(maxFileSize))
	}
	return src, nil
}

// linkErrText says why a symbolic link's target cannot be read.
func linkErrText(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case strings.Contains(err.Error(), "escapes from parent"):
		return "is outside the configuration directory; configuration is read only from inside it"
	}
	return fmt.Sprintf("cannot be read (%v)", pathErrText(err))
}

// describeMode names a file type that is not a regular file.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// isConfigFile reports whether a directory entry is a configuration file:
// *.hcl but not the lock file, var files, or editor backups.
func isConfigFile(name string) bool {
	return strings.HasSuffix(name, ".hcl") &&
		name != lockFileName &&
		!strings.HasSuffix(name, varFileSuffix) &&
		!strings.HasPrefix(name, ".") &&
		!strings.HasPrefix(name, "#")
}

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "image", LabelNames: []string{"name"}},
		{Type: "egress", LabelNames: []string{"name"}},
		{Type: "secret", LabelNames: []string{"name"}},
		{Type: "vfs", LabelNames: []string{"name"}},
		{Type: "sandbox", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
	},
}

// blockKinds maps a top-level block type to the kind of address it
// declares.
var blockKinds = map[string]addrs.Kind{
	"variable": addrs.Variable,
	"image":    addrs.Image,
	"egress":   addrs.Egress,
	"secret":   addrs.Secret,
	"vfs":      addrs.VFS,
	"sandbox":  addrs.Sandbox,
	"output":   addrs.Output,
}

// kindNoun names a kind in messages ("an image named …").
var kindNoun = map[addrs.Kind]string{
	addrs.Variable: "input variable",
	addrs.Local:    "local value",
	addrs.Image:    "image",
	addrs.Egress:   "egress block",
	addrs.Secret:   "secret",
	addrs.VFS:      "vfs block",
	addrs.Sandbox:  "sandbox",
	addrs.Output:   "output",
}

func (l *loader) collect(f *hcl.File) {
	content, diags := f.Body.Content(fileSchema)
	l.diags = append(l.diags, diags...)
	for _, b := range content.Blocks {
		if b.Type == "locals" {
			l.collectLocals(b)
			continue
		}
		kind := blockKinds[b.Type]
		name := b.Labels[0]
		if !addrs.ValidName(name) {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid block name",
				Detail:   fmt.Sprintf("%q is not a valid name for %s block: a name starts with a letter or underscore and holds only letters, digits, underscores and dashes.", name, article(b.Type)),
				Subject:  b.LabelRanges[0].Ptr(),
			})
			continue
		}
		ref := addrs.Ref{Kind: kind, Name: name}
		if prev, ok := l.first[ref]; ok {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Duplicate %s block", b.Type),
				Detail:   fmt.Sprintf("A %s block named %q was already declared at %s. Block names must be unique within a configuration.", b.Type, name, rangeString(prev.DefRange)),
				Subject:  b.DefRange.Ptr(),
				Context:  hcl.RangeBetween(b.DefRange, b.Body.MissingItemRange()).Ptr(),
			})
			continue
		}
		l.first[ref] = b
		l.blocks[kind] = append(l.blocks[kind], b)
	}
}

func (l *loader) collectLocals(b *hcl.Block) {
	attrs, diags := b.Body.JustAttributes()
	l.diags = append(l.diags, diags...)
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	// Attributes come back as a map; keep source order.
	sort.Slice(names, func(i, j int) bool {
		return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte
	})
	for _, name := range names {
		a := attrs[name]
		if prev, ok := l.localsAttr[name]; ok {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate local value",
				Detail:   fmt.Sprintf("A local value named %q was already defined at %s. Local value names must be unique within a configuration.", name, rangeString(prev.NameRange)),
				Subject:  a.NameRange.Ptr(),
			})
			continue
		}
		l.localsAttr[name] = a
		l.localOrder = append(l.localOrder, name)
	}
}

// rangeString renders a range's start as file:line,column for details.
func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

// origin builds a policy origin for a rule declared in block at r.
func (l *loader) origin(block string, r hcl.Range) policy.Origin {
	file, ok := l.relNames[r.Filename]
	if !ok {
		file = r.Filename
	}
	return policy.Origin{Block: block, File: file, Line: r.Start.Line}
}

func (l *loader) errorf(subject hcl.Range, summary, format string, args ...any) {
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

func (l *loader) warnf(subject hcl.Range, summary, format string, args ...any) {
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "value", Required: true},
		{Name: "description"},
		{Name: "sensitive"},
	},
}

func (l *loader) decodeOutput(b *hcl.Block) {
	content, diags := b.Body.Content(outputSchema)
	l.diags = append(l.diags, diags...)
	o := &Output{Name: b.Labels[0], DeclRange: b.DefRange}
	l.cfg.Outputs[o.Name] = o
	o.Description, _ = l.attrString(content.Attributes["description"])
	o.Sensitive, _ = l.attrBool(content.Attributes["sensitive"])
	if a := content.Attributes["value"]; a != nil {
		if v, ok := l.eval(a.Expr); ok {
			o.Value = goValue(v)
		}
	}
}
