package lockfiles

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/zclconf/go-cty/cty"
)

// Read reads the lock file at path with ReadFile and parses it with Parse.
//
// A missing file is not an error: Read returns (nil, nil), so callers can
// tell "never locked" from an empty lock. Every Lock method accepts a nil
// receiver. Any other failure to read the file is an error diagnostic.
func Read(path string) (*Lock, hcl.Diagnostics) {
	src, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read lock file",
			Detail:   err.Error(),
		}}
	}
	return Parse(src, path)
}

// maxSize bounds how much of a lock file Read reads.
const maxSize = 64 << 20

// ReadFile returns the bytes of the lock file at path. A missing file (or
// directory) is an error satisfying errors.Is(err, fs.ErrNotExist).
//
// The lock file lives in a configuration directory, which may be an
// untrusted checkout, so ReadFile reads it only from inside the directory
// that holds path: it may be a symbolic link that stays inside that
// directory, but a link that leaves it, a dangling link, or anything other
// than a regular file is an error naming path, and nothing is read through
// it, so no diagnostic can quote what it points at.
func ReadFile(path string) ([]byte, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fs.ErrNotExist
		}
		return nil, err
	}
	defer root.Close()
	fi, err := root.Stat(name)
	if err != nil {
		if _, lerr := root.Lstat(name); lerr == nil {
			// The name exists: it is a link whose target cannot be used.
			if strings.Contains(err.Error(), "escapes from parent") {
				return nil, fmt.Errorf("%s is a symbolic link that leads outside %s; the lock file is read only from inside its directory", path, dir)
			}
			return nil, fmt.Errorf("%s is a symbolic link whose target cannot be read: %v", path, unwrapPath(err))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fs.ErrNotExist
		}
		return nil, fmt.Errorf("reading %s: %v", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", path, unwrapPath(err))
	}
	defer f.Close()
	if got, err := f.Stat(); err != nil || !os.SameFile(fi, got) {
		return nil, fmt.Errorf("%s changed while it was being opened", path)
	}
	src, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", path, unwrapPath(err))
	}
	if len(src) > maxSize {
		return nil, fmt.Errorf("%s is larger than %d MiB; it was not written by sbx", path, maxSize>>20)
	}
	return src, nil
}

// unwrapPath drops the operation and path of a *fs.PathError, which the
// messages here name themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse parses the bytes of a lock file; filename is used in diagnostics.
//
// Parsing is strict. The file must be native HCL syntax holding only image
// blocks with the attributes and input blocks Marshal writes; every value
// must be a quoted string literal (no expressions, templates or
// references); names and hashes must be well formed; and finally the
// bytes must be exactly what Marshal renders for the parsed lock, so hand
// edits, comments, reordering and reformatting are all errors naming the
// first line that differs. On any error Parse returns a nil Lock: a lock
// file is used whole or not at all. A file with git conflict markers is
// one error at the first marker; every error says that `sbx lock`
// rebuilds the file (see Salvage).
func Parse(src []byte, filename string) (*Lock, hcl.Diagnostics) {
	if line := HasConflictMarkers(src); line > 0 {
		return nil, hcl.Diagnostics{conflicted(src, line, filename)}
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, append(diags, repairHint(filename))
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid lock file",
			Detail:   "The lock file must be written in native HCL syntax.",
		}, repairHint(filename))
	}
	var d decoder
	l := d.lock(body)
	diags = append(diags, d.diags...)
	if diags.HasErrors() {
		return nil, append(diags, repairHint(filename))
	}
	if want := Marshal(l); !bytes.Equal(want, src) {
		return nil, append(diags, notCanonical(src, want, filename))
	}
	return l, diags
}

// decoder collects diagnostics while walking a lock file's syntax tree.
type decoder struct {
	diags hcl.Diagnostics
}

func (d *decoder) errorf(subject hcl.Range, summary, format string, args ...any) {
	r := subject
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  &r,
	})
}

func (d *decoder) lock(body *hclsyntax.Body) *Lock {
	l := &Lock{Images: map[string]*Image{}}
	seen := map[string]hcl.Range{}
	for _, attr := range sortedAttrs(body) {
		d.errorf(attr.NameRange, "Unsupported argument", "A lock file holds only image blocks; %q is not expected here.", attr.Name)
	}
	for _, blk := range body.Blocks {
		if blk.Type != "image" {
			d.errorf(blk.TypeRange, "Unsupported block type", "A lock file holds only image blocks; %q blocks are not expected here.", blk.Type)
			continue
		}
		if len(blk.Labels) != 1 {
			d.errorf(blk.TypeRange, "Invalid image block", "An image block has exactly one label, the image's name.")
			continue
		}
		name := blk.Labels[0]
		if !addrs.ValidName(name) {
			d.errorf(blk.LabelRanges[0], "Invalid image name", "%q is not a valid block name.", name)
			continue
		}
		if prev, dup := seen[name]; dup {
			d.errorf(blk.LabelRanges[0], "Duplicate image block", "image %q is already locked at %s.", name, prev)
			continue
		}
		seen[name] = blk.LabelRanges[0]
		l.Images[name] = d.image(name, blk)
	}
	return l
}

func (d *decoder) image(name string, blk *hclsyntax.Block) *Image {
	img := &Image{Name: name, Inputs: map[string]*Pin{}, Outputs: map[string]string{}}
	for _, attr := range sortedAttrs(blk.Body) {
		switch attr.Name {
		case "platform":
			if v, ok := d.str(attr); ok {
				if err := checkPlatform(v); err != nil {
					d.errorf(attr.Expr.Range(), "Invalid platform", "%v", err)
				}
				img.Platform = v
			}
		case "input_hash":
			if v, ok := d.str(attr); ok {
				d.checkHash(attr, v, checkDigest)
				img.InputHash = v
			}
		case "provision_hash":
			if v, ok := d.str(attr); ok {
				d.checkHash(attr, v, checkDigest)
				img.ProvisionHash = v
			}
		case "outputs":
			d.outputs(attr, img.Outputs)
		default:
			d.errorf(attr.NameRange, "Unsupported argument", "An image lock entry has platform, input_hash, provision_hash, input blocks and outputs; %q is not expected here.", attr.Name)
		}
	}
	if img.Platform == "" {
		d.missing(blk, "platform", fmt.Sprintf("image %q", name))
	}
	if img.InputHash == "" {
		d.missing(blk, "input_hash", fmt.Sprintf("image %q", name))
	}
	seen := map[string]hcl.Range{}
	for _, in := range blk.Body.Blocks {
		if in.Type != "input" {
			d.errorf(in.TypeRange, "Unsupported block type", "An image lock entry has only input blocks; %q blocks are not expected here.", in.Type)
			continue
		}
		if len(in.Labels) != 1 {
			d.errorf(in.TypeRange, "Invalid input block", "An input block has exactly one label, the input's key (\"base\", \"kernel\" or \"artifact.NAME\").")
			continue
		}
		key := in.Labels[0]
		if err := checkInputKey(key); err != nil {
			d.errorf(in.LabelRanges[0], "Invalid input key", "%v", err)
			continue
		}
		if prev, dup := seen[key]; dup {
			d.errorf(in.LabelRanges[0], "Duplicate input block", "Input %q of image %q is already locked at %s.", key, name, prev)
			continue
		}
		seen[key] = in.LabelRanges[0]
		img.Inputs[key] = d.pin(name, key, in)
	}
	return img
}

func (d *decoder) missing(blk *hclsyntax.Block, attr, what string) {
	d.errorf(blk.DefRange(), "Missing required argument", "The lock entry of %s has no %s.", what, attr)
}

// kindRule lists which pin attributes a source kind must and may have.
type kindRule struct {
	required []string
	allowed  []string
}

// kinds are the source kinds a pin may have (the lang.SourceKind values)
// and the attributes each one records; see Pin.
var kinds = map[string]kindRule{
	"oci":        {required: []string{"digest", "manifest"}, allowed: []string{"digest", "manifest"}},
	"oci-layout": {required: []string{"digest", "manifest"}, allowed: []string{"digest", "manifest"}},
	"npm":        {required: []string{"version", "integrity"}, allowed: []string{"version", "integrity", "sha256"}},
	"url":        {required: []string{"sha256"}, allowed: []string{"sha256"}},
	"file":       {required: []string{"sha256"}, allowed: []string{"sha256"}},
	"deb":        {required: []string{"version", "sha256"}, allowed: []string{"version", "sha256", "filename"}},
	// One package of an image's packages closure, and the request the
	// closure was resolved for.
	KindDebPackage:  {required: []string{"version", "architecture", "filename", "sha256", "size"}, allowed: []string{"version", "architecture", "filename", "sha256", "size"}},
	KindDebPackages: {required: []string{"digest"}, allowed: []string{"digest"}},
	KindApkPackage:  {required: []string{"version", "architecture", "filename", "sha256", "size"}, allowed: []string{"version", "architecture", "filename", "sha256", "size"}},
	KindApkPackages: {required: []string{"digest"}, allowed: []string{"digest"}},
}

func (d *decoder) pin(image, key string, blk *hclsyntax.Block) *Pin {
	p := &Pin{}
	set := map[string]*hclsyntax.Attribute{}
	for _, attr := range sortedAttrs(blk.Body) {
		f := p.field(attr.Name)
		if f == nil {
			d.errorf(attr.NameRange, "Unsupported argument", "An input pin has %s; %q is not expected here.", strings.Join(pinAttrs, ", "), attr.Name)
			continue
		}
		v, ok := d.str(attr)
		if !ok {
			continue
		}
		*f = v
		set[attr.Name] = attr
		switch attr.Name {
		case "digest", "manifest":
			d.checkHash(attr, v, checkDigest)
		case "sha256":
			d.checkHash(attr, v, checkSHA256Hex)
		case "integrity":
			d.checkHash(attr, v, checkIntegrity)
		case "size":
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
				d.errorf(attr.Expr.Range(), "Invalid size", "Size %q must be a number of bytes.", v)
			}
		case "architecture":
			if v == "" || strings.ContainsAny(v, "/\\ \t\r\n") {
				d.errorf(attr.Expr.Range(), "Invalid architecture", "Architecture %q must be a Debian architecture name.", v)
			}
		case "version":
			if strings.ContainsAny(v, " \t\r\n") {
				d.errorf(attr.Expr.Range(), "Invalid version", "Version %q has white space; a pin holds one exact version.", v)
			}
		case "filename":
			if strings.HasPrefix(key, PackageKeyPrefix) {
				if !poolPath(v) {
					d.errorf(attr.Expr.Range(), "Invalid file name", "File name %q must be a clean path relative to a repository: no host, no leading /, no \"..\", no white space.", v)
				}
			} else if strings.ContainsAny(v, "/\\ \t\r\n") {
				d.errorf(attr.Expr.Range(), "Invalid file name", "File name %q must be a bare file name: no directories, hosts or white space.", v)
			}
		}
	}
	for _, b := range blk.Body.Blocks {
		d.errorf(b.TypeRange, "Unsupported block type", "An input pin has no nested blocks; %q is not expected here.", b.Type)
	}
	what := fmt.Sprintf("input %q of image %q", key, image)
	if p.Source == "" {
		d.missing(blk, "source", what)
	}
	if p.Kind == "" {
		d.missing(blk, "kind", what)
		return p
	}
	rule, ok := kinds[p.Kind]
	if !ok {
		d.errorf(set["kind"].Expr.Range(), "Unknown source kind", "%q is not a source kind; expected one of %s.", p.Kind, strings.Join(sortedKeys(kinds), ", "))
		return p
	}
	for _, name := range rule.required {
		if _, ok := set[name]; !ok {
			d.missing(blk, name, fmt.Sprintf("%s (kind %q)", what, p.Kind))
		}
	}
	for _, name := range pinAttrs[2:] {
		attr, ok := set[name]
		if ok && !contains(rule.allowed, name) {
			d.errorf(attr.NameRange, "Unsupported argument", "A pin of kind %q has no %s.", p.Kind, name)
		}
	}
	return p
}

func (d *decoder) outputs(attr *hclsyntax.Attribute, out map[string]string) {
	obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		d.errorf(attr.Expr.Range(), "Invalid outputs", "outputs must be an object of output names to \"sha256:<hex>\" strings.")
		return
	}
	seen := map[string]hcl.Range{}
	for _, item := range obj.Items {
		name := hcl.ExprAsKeyword(item.KeyExpr)
		if name == "" {
			if s, ok := literal(unwrapKey(item.KeyExpr)); ok {
				name = s
			} else {
				d.errorf(item.KeyExpr.Range(), "Invalid output name", "An output name must be a literal name.")
				continue
			}
		}
		if !addrs.ValidName(name) {
			d.errorf(item.KeyExpr.Range(), "Invalid output name", "%q is not a valid output name.", name)
			continue
		}
		if prev, dup := seen[name]; dup {
			d.errorf(item.KeyExpr.Range(), "Duplicate output", "Output %q is already recorded at %s.", name, prev)
			continue
		}
		seen[name] = item.KeyExpr.Range()
		v, ok := literal(item.ValueExpr)
		if !ok {
			d.errorf(item.ValueExpr.Range(), "Invalid value", "The hash of output %q must be a quoted string literal; lock files hold no expressions.", name)
			continue
		}
		if err := checkDigest(v); err != nil {
			d.errorf(item.ValueExpr.Range(), "Invalid hash", "Output %q: %v", name, err)
			continue
		}
		out[name] = v
	}
}

func unwrapKey(e hclsyntax.Expression) hclsyntax.Expression {
	if k, ok := e.(*hclsyntax.ObjectConsKeyExpr); ok {
		return k.Wrapped
	}
	return e
}

// str returns the attribute's value if it is a non-empty quoted string
// literal and records an error otherwise.
func (d *decoder) str(attr *hclsyntax.Attribute) (string, bool) {
	v, ok := literal(attr.Expr)
	if !ok {
		d.errorf(attr.Expr.Range(), "Invalid value", "%s must be a quoted string literal; lock files hold no expressions, references or templates.", attr.Name)
		return "", false
	}
	if v == "" {
		d.errorf(attr.Expr.Range(), "Invalid value", "%s is empty; the lock omits empty values.", attr.Name)
		return "", false
	}
	return v, true
}

// literal returns the value of a quoted string with no interpolation or
// directives.
func literal(e hclsyntax.Expression) (string, bool) {
	t, ok := e.(*hclsyntax.TemplateExpr)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, part := range t.Parts {
		lit, ok := part.(*hclsyntax.LiteralValueExpr)
		if !ok || lit.Val.Type() != cty.String || !lit.Val.IsKnown() || lit.Val.IsNull() {
			return "", false
		}
		b.WriteString(lit.Val.AsString())
	}
	return b.String(), true
}

func (d *decoder) checkHash(attr *hclsyntax.Attribute, v string, check func(string) error) {
	if err := check(v); err != nil {
		d.errorf(attr.Expr.Range(), "Invalid hash", "%s: %v", attr.Name, err)
	}
}

func sortedAttrs(body *hclsyntax.Body) []*hclsyntax.Attribute {
	attrs := make([]*hclsyntax.Attribute, 0, len(body.Attributes))
	for _, a := range body.Attributes {
		attrs = append(attrs, a)
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].SrcRange.Start.Byte < attrs[j].SrcRange.Start.Byte })
	return attrs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkDigest accepts "sha256:" followed by 64 lower-case hex digits.
func checkDigest(s string) error {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 || !isLowerHex(hex) {
		return fmt.Errorf("%q is not a digest of the form \"sha256:\" followed by 64 lower-case hex digits", s)
	}
	return nil
}

// checkSHA256Hex accepts 64 lower-case hex digits.
func checkSHA256Hex(s string) error {
	if len(s) != 64 || !isLowerHex(s) {
		return fmt.Errorf("%q is not a sha256 of 64 lower-case hex digits", s)
	}
	return nil
}

// checkIntegrity accepts a subresource-integrity sha512 value as npm
// records it: "sha512-" and the standard base64 of 64 bytes.
func checkIntegrity(s string) error {
	b64, ok := strings.CutPrefix(s, "sha512-")
	if ok {
		raw, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err == nil && len(raw) == 64 {
			return nil
		}
	}
	return fmt.Errorf("%q is not an integrity value of the form \"sha512-\" followed by the base64 of 64 bytes", s)
}

// checkPlatform accepts os/arch or os/arch/variant in lower case.
func checkPlatform(s string) error {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("platform %q must be os/arch or os/arch/variant, e.g. linux/amd64", s)
	}
	for _, p := range parts {
		if p == "" || strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) >= 0 {
			return fmt.Errorf("platform %q must be os/arch or os/arch/variant, e.g. linux/amd64", s)
		}
	}
	return nil
}

// checkInputKey accepts "base", "kernel", "artifact.NAME", "packages"
// and "package.NAME".
func checkInputKey(key string) error {
	if key == "base" || key == "kernel" || key == PackagesKey {
		return nil
	}
	if name, ok := strings.CutPrefix(key, PackageKeyPrefix); ok && (debName(name) || apkName(name)) {
		return nil
	}
	if name, ok := strings.CutPrefix(key, "artifact."); ok && addrs.ValidName(name) {
		return nil
	}
	return fmt.Errorf("%q is not an input key; expected \"base\", \"kernel\" or \"artifact.NAME\"", key)
}

// notCanonical reports the first line where src differs from the canonical
// rendering want.
func notCanonical(src, want []byte, filename string) *hcl.Diagnostic {
	got := bytes.SplitAfter(src, []byte("\n"))
	exp := bytes.SplitAfter(want, []byte("\n"))
	i := 0
	for i < len(got) && i < len(exp) && bytes.Equal(got[i], exp[i]) {
		i++
	}
	var detail string
	switch {
	case i >= len(got) || len(got[i]) == 0:
		detail = fmt.Sprintf("The file ends at line %d; sbx lock would continue with %q.", i+1, trimNL(exp[i]))
	case i >= len(exp) || len(exp[i]) == 0:
		detail = fmt.Sprintf("Line %d is %q; sbx lock would end the file before it.", i+1, trimNL(got[i]))
	case trimNL(got[i]) == trimNL(exp[i]):
		detail = fmt.Sprintf("Line %d ends differently; sbx lock ends every line with a single newline (\\n).", i+1)
	default:
		detail = fmt.Sprintf("Line %d is %q; sbx lock would write %q.", i+1, trimNL(got[i]), trimNL(exp[i]))
	}
	start := 0
	for _, l := range got[:min(i, len(got))] {
		start += len(l)
	}
	end := start
	if i < len(got) {
		end += len(bytes.TrimRight(got[i], "\r\n"))
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  filepath.Base(filename) + " is not in canonical form (was it edited by hand?); run sbx lock to regenerate",
		Detail:   detail,
		Subject: &hcl.Range{
			Filename: filename,
			Start:    hcl.Pos{Line: i + 1, Column: 1, Byte: start},
			End:      hcl.Pos{Line: i + 1, Column: 1 + end - start, Byte: end},
		},
	}
}

func trimNL(b []byte) string { return string(bytes.TrimRight(b, "\r\n")) }

// repairHint is the diagnostic that ends the errors of a lock file that
// cannot be read: it says how to rebuild it.
func repairHint(filename string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  filepath.Base(filename) + " cannot be read; run sbx lock to rebuild it",
		Detail:   "sbx lock rebuilds the lock file from the configuration, keeping every pin it can still read and resolving the others again.",
	}
}

// conflicted is the error for a lock file left with git conflict markers,
// the first of them at line.
func conflicted(src []byte, line int, filename string) *hcl.Diagnostic {
	start := 0
	lines := bytes.SplitAfter(src, []byte("\n"))
	for _, l := range lines[:line-1] {
		start += len(l)
	}
	end := start + len(bytes.TrimRight(lines[line-1], "\r\n"))
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  filepath.Base(filename) + " has unresolved merge conflicts; run sbx lock to rebuild it",
		Detail: fmt.Sprintf("Line %d is a git conflict marker. sbx lock rebuilds the lock file from the configuration: "+
			"it keeps every pin both sides of each conflict agree on or only one side has, takes the one pin of an input "+
			"the sides disagree on that matches the configuration's source, and resolves the rest again.", line),
		Subject: &hcl.Range{
			Filename: filename,
			Start:    hcl.Pos{Line: line, Column: 1, Byte: start},
			End:      hcl.Pos{Line: line, Column: 1 + end - start, Byte: end},
		},
	}
}

// debName reports whether s is a Debian package name (policy 5.6.1).
func debName(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("+-.", c)) {
			return false
		}
	}
	return true
}

// apkName reports whether s is an Alpine package name (apk also allows
// upper-case letters and "_", which Debian names never hold).
func apkName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._+-", c)) {
			return false
		}
	}
	return true
}

// poolPath reports whether p is a clean path inside a repository.
func poolPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t\r\n\\?#") {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}
