package lang

import (
	"fmt"
	"github.com/sbx-dev/sbx/platform"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/zclconf/go-cty/cty"
)

var imageSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "platform"},
		{Name: "base"},
		{Name: "size"},
		{Name: "env"},
		{Name: "symlinks"},
		{Name: "host_paths"},
		{Name: "packages"},
		{Name: "repositories"},
		{Name: "keyring"},
		{Name: "executables"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "kernel"},
		{Type: "artifact", LabelNames: []string{"name"}},
		{Type: "user", LabelNames: []string{"name"}},
		{Type: "file", LabelNames: []string{"path"}},
		{Type: "provision", LabelNames: []string{"name"}},
	},
}

var kernelSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true},
		{Name: "sha256"},
		{Name: "file"},
		{Name: "modules"},
		{Name: "cmdline"},
	},
}

var artifactSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true},
		{Name: "sha256"},
		{Name: "file"},
		{Name: "dest", Required: true},
		{Name: "extract"},
		{Name: "keep_special"},
		{Name: "mode"},
		{Name: "uid"},
		{Name: "gid"},
	},
}

var userSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "uid", Required: true},
		{Name: "gid"},
		{Name: "home"},
		{Name: "shell"},
		{Name: "groups"},
	},
}

var fileSchemaImage = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "content", Required: true},
		{Name: "mode"},
		{Name: "uid"},
		{Name: "gid"},
	},
}

// defaultPlatform is the platform of an image that names none.
var defaultPlatform = Platform{OS: "linux", Architecture: "amd64"}

// Limits on numeric ids: uids and gids are 32-bit, and 4294967295 means
// "no id" to the kernel.
const maxID = 4294967294

func (l *loader) decodeImage(b *hcl.Block) {
	content, diags := b.Body.Content(imageSchema)
	l.diags = append(l.diags, diags...)
	img := &Image{Name: b.Labels[0], Platform: defaultPlatform, DeclRange: b.DefRange}
	l.cfg.Images[img.Name] = img

	if a := content.Attributes["platform"]; a != nil {
		if s, ok := l.attrString(a); ok {
			p, err := ParsePlatform(s)
			if err != nil {
				l.errorf(a.Expr.Range(), "Invalid platform", "%v.", err)
			} else {
				img.Platform = p
			}
		}
	}
	if a := content.Attributes["base"]; a != nil {
		if src := l.attrSource(a, nil); src != nil {
			if src.Kind != SourceOCI && src.Kind != SourceOCILayout {
				l.errorf(a.Expr.Range(), "Invalid base image",
					"The base of an image is an OCI image (a registry reference or oci-layout:DIR), not %s source. Add other sources as artifacts.", article(string(src.Kind)))
			} else {
				img.Base = src
			}
		}
	}
	if a := content.Attributes["size"]; a != nil {
		img.Size = l.attrSize(a, 1<<20)
	}
	if a := content.Attributes["env"]; a != nil {
		img.Env, l.imageEnv[img.Name] = l.attrEnv(a)
	}

	dests := map[string]hcl.Range{}
	if a := content.Attributes["symlinks"]; a != nil {
		img.Symlinks = l.attrSymlinks(a, dests, img.Name)
	}
	uids := map[int]hcl.Range{}
	names := map[string]map[string]hcl.Range{}
	for _, blk := range content.Blocks {
		if len(blk.Labels) > 0 {
			seen := names[blk.Type]
			if seen == nil {
				seen = map[string]hcl.Range{}
				names[blk.Type] = seen
			}
			if prev, dup := seen[blk.Labels[0]]; dup {
				l.errorf(blk.DefRange, fmt.Sprintf("Duplicate %s block", blk.Type),
					"image.%s already has %s block %q at %s.", img.Name, article(blk.Type), blk.Labels[0], rangeString(prev))
				continue
			}
			seen[blk.Labels[0]] = blk.DefRange
		}
		switch blk.Type {
		case "kernel":
			if img.Kernel != nil {
				l.errorf(blk.DefRange, "Duplicate kernel block", "image.%s already has a kernel block at %s; an image has one kernel.", img.Name, rangeString(img.Kernel.DeclRange))
				continue
			}
			img.Kernel = l.decodeKernel(blk)
		case "artifact":
			if a := l.decodeArtifact(blk); a != nil {
				img.Artifacts = append(img.Artifacts, a)
				if !a.Extract && a.Dest != "" {
					l.claimDest(dests, a.Dest, blk.DefRange, img.Name)
				}
			}
		case "user":
			if u := l.decodeUser(blk); u != nil {
				if prev, dup := uids[u.UID]; dup {
					l.errorf(blk.DefRange, "Duplicate uid",
						"user %q has uid %d, which the user at %s already has. Each user needs its own uid.", u.Name, u.UID, rangeString(prev))
				}
				uids[u.UID] = blk.DefRange
				img.Users = append(img.Users, u)
			}
		case "provision":
			img.Provision = append(img.Provision, l.decodeProvision(img, blk))
		case "file":
			if f := l.decodeFile(blk); f != nil {
				img.Files = append(img.Files, f)
				if f.Path != "" {
					l.claimDest(dests, f.Path, blk.DefRange, img.Name)
				}
			}
		}
	}

	if a := content.Attributes["host_paths"]; a != nil {
		img.HostPaths = l.attrHostPaths(a)
	}
	l.decodePackages(img, content.Attributes)
	l.confineSources(img)
}

// attrHostPaths evaluates an image's host_paths: directories outside the
// configuration directory that its file: and oci-layout: sources may read.
// Each is absolute or starts with "..", is not the root directory, and is
// kept cleaned.
func (l *loader) attrHostPaths(a *hcl.Attribute) []string {
	items, _ := l.attrStrings(a)
	var out []string
	for _, it := range items {
		p := filepath.Clean(it.Value)
		switch {
		case it.Value == "" || strings.ContainsRune(it.Value, 0):
			l.errorf(it.Range, "Invalid host path", "A host path is a non-empty directory path without NUL bytes.")
		case insideDir(p):
			l.errorf(it.Range, "Invalid host path",
				"%q is inside the configuration directory, where sources are read anyway; host_paths lists directories outside it (absolute, or starting with \"..\").", it.Value)
		case p == string(filepath.Separator):
			l.errorf(it.Range, "Invalid host path", "host_paths cannot open the whole host file system; name the directories sources read from.")
		case slices.Contains(out, p):
			l.errorf(it.Range, "Duplicate host path", "%q is listed twice.", it.Value)
		default:
			out = append(out, p)
		}
	}
	return out
}

// confineSources checks that every file: and oci-layout: source of img
// names a path inside the configuration directory, or inside one of the
// image's host_paths (recorded in Source.HostPath). This is the check on
// the path as written; readers confine symbolic links (Source.LocalRoot).
func (l *loader) confineSources(img *Image) {
	srcs := []*Source{img.Base}
	if img.Kernel != nil {
		srcs = append(srcs, img.Kernel.Source)
	}
	for _, a := range img.Artifacts {
		srcs = append(srcs, a.Source)
	}
	for _, src := range srcs {
		if src == nil || !src.IsLocal() || insideDir(src.Ref) {
			continue
		}
		p := absIn(l.cfg.Dir, src.Ref)
		for _, h := range img.HostPaths {
			if within(p, absIn(l.cfg.Dir, h)) {
				src.HostPath = h
				break
			}
		}
		if src.HostPath != "" {
			continue
		}
		hint := "list the directory holding it in the image's host_paths, as in host_paths = [\"/opt/models\"] (plans show such inputs as widening)"
		if len(img.HostPaths) > 0 {
			hint = fmt.Sprintf("it is in none of the image's host_paths (%s); add the directory holding it", strings.Join(img.HostPaths, ", "))
		}
		l.errorf(src.Range, "Source outside the configuration directory",
			"%q reads %s, outside the configuration directory %s. A local source is read inside the configuration directory unless the spec opts in: %s.",
			src.Raw, src.Ref, l.cfg.Dir, hint)
	}
}

// attrSymlinks evaluates a map of symbolic links, link path to target. A
// link path is an absolute, clean guest path written by no other block; a
// target is any non-empty path (relative targets are relative to the
// link's directory, as for ln -s).
func (l *loader) attrSymlinks(a *hcl.Attribute, dests map[string]hcl.Range, image string) map[string]string {
	items, ok := l.attrStringMap(a)
	if !ok {
		return nil
	}
	links := map[string]string{}
	for _, it := range items {
		if err := checkGuestPath(it.Key); err != nil {
			l.errorf(it.KeyRange, "Invalid symlink path", "%v.", err)
			continue
		}
		if it.Key == "/" {
			l.errorf(it.KeyRange, "Invalid symlink path", "the root directory cannot be a symbolic link.")
			continue
		}
		if it.Value == "" || strings.ContainsRune(it.Value, 0) {
			l.errorf(it.Range, "Invalid symlink target", "the target of %s must be a non-empty path without NUL bytes.", it.Key)
			continue
		}
		l.claimDest(dests, it.Key, it.KeyRange, image)
		links[it.Key] = it.Value
	}
	return links
}

// claimDest records that a file or artifact writes to p, reporting a path
// written twice.
func (l *loader) claimDest(dests map[string]hcl.Range, p string, r hcl.Range, image string) {
	if prev, dup := dests[p]; dup {
		l.errorf(r, "Duplicate destination path",
			"%s is already written by the block at %s in image.%s. Each file path in an image comes from one block.", p, rangeString(prev), image)
		return
	}
	dests[p] = r
}

// ParsePlatform parses "os/arch" or "os/arch/variant" (platform.Parse).
func ParsePlatform(s string) (Platform, error) { return platform.Parse(s) }

// attrSource evaluates a source string; sha is the block's sha256
// attribute, if any.
func (l *loader) attrSource(a, sha *hcl.Attribute) *Source {
	raw, ok := l.attrString(a)
	if !ok {
		return nil
	}
	src, err := ParseSource(raw, a.Expr.Range())
	if err != nil {
		l.errorf(a.Expr.Range(), "Invalid source", "%v.", err)
		return nil
	}
	src.Vars = l.varsOf(a.Expr)
	if sha == nil {
		return src
	}
	s, ok := l.attrString(sha)
	if !ok {
		return src
	}
	s = strings.TrimPrefix(strings.ToLower(s), "sha256:")
	switch {
	case !isSHA256(s):
		l.errorf(sha.Expr.Range(), "Invalid sha256", "sha256 must be 64 hexadecimal digits (the SHA-256 of the downloaded file).")
	case src.Kind == SourceOCI || src.Kind == SourceOCILayout:
		l.errorf(sha.Expr.Range(), "sha256 does not apply to OCI sources",
			"Pin an OCI image by digest in the source itself, as in \"%s@sha256:…\"; the lock file records the digest otherwise.", strings.SplitN(src.Ref, "@", 2)[0])
	default:
		src.SHA256 = s
	}
	return src
}

// attrSize evaluates a size string of at least min bytes.
func (l *loader) attrSize(a *hcl.Attribute, min int64) int64 {
	s, ok := l.attrString(a)
	if !ok {
		return 0
	}
	n, err := ParseSize(s)
	if err != nil {
		l.errorf(a.Expr.Range(), "Invalid size", "%v.", err)
		return 0
	}
	if n < min {
		l.errorf(a.Expr.Range(), fmt.Sprintf("%s too small", capitalize(a.Name)), "%s must be at least %s.", a.Name, FormatSize(min))
		return 0
	}
	return n
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// attrMode evaluates a file mode string.
func (l *loader) attrMode(a *hcl.Attribute) (uint32, bool) {
	if a == nil {
		return 0, false
	}
	v, ok := l.eval(a.Expr)
	if !ok || v.IsNull() {
		return 0, false
	}
	if v.Type() == cty.Number {
		l.errorf(a.Expr.Range(), "File mode must be a string",
			"Write the mode as an octal string, as in mode = \"0755\": HCL reads the number 0755 as decimal 755.")
		return 0, false
	}
	s, ok := l.toString(v, a, a.Name)
	if !ok {
		return 0, false
	}
	m, err := ParseMode(s)
	if err != nil {
		l.errorf(a.Expr.Range(), "Invalid file mode", "%v.", err)
		return 0, false
	}
	return m, true
}

// attrEnv evaluates a map of environment variables; it also returns the
// entries with their ranges.
func (l *loader) attrEnv(a *hcl.Attribute) (map[string]string, []item) {
	items, ok := l.attrStringMap(a)
	if !ok {
		return nil, nil
	}
	env := map[string]string{}
	for _, it := range items {
		if !validEnvName(it.Key) {
			l.errorf(it.KeyRange, "Invalid environment variable name",
				"%q is not an environment variable name: use letters, digits and underscores, not starting with a digit.", it.Key)
			continue
		}
		env[it.Key] = it.Value
	}
	return env, items
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// checkGuestPath checks a path in the image or guest: absolute and clean.
func checkGuestPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("the path is empty")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is not an absolute path; guest paths start with /", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q contains a NUL byte", p)
	case hasDotDot(p):
		return fmt.Errorf("%q has a \"..\" component; write the path it means", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not clean; write %q", p, path.Clean(p))
	}
	return nil
}

// checkRelPattern checks a path or glob relative to an archive or mount
// root: not absolute, no "..", no empty components.
func checkRelPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("the path is empty")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is absolute; it is relative to the root it applies to", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q contains a NUL byte", p)
	case hasDotDot(p):
		return fmt.Errorf("%q has a \"..\" component", p)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%q is not a valid pattern: %v", p, err)
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

func (l *loader) decodeKernel(b *hcl.Block) *Kernel {
	content, diags := b.Body.Content(kernelSchema)
	l.diags = append(l.diags, diags...)
	k := &Kernel{DeclRange: b.DefRange}
	if a := content.Attributes["source"]; a != nil {
		k.Source = l.attrSource(a, content.Attributes["sha256"])
	}
	if a := content.Attributes["file"]; a != nil {
		if s, ok := l.attrString(a); ok {
			if err := checkRelPattern(s); err != nil {
				l.errorf(a.Expr.Range(), "Invalid file path", "file names the kernel inside its source: %v.", err)
			} else {
				k.File = s
			}
		}
	}
	if a := content.Attributes["modules"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			if !validModuleName(it.Value) {
				l.errorf(it.Range, "Invalid module name", "%q is not a kernel module name (letters, digits, _ and -).", it.Value)
				continue
			}
			k.Modules = append(k.Modules, it.Value)
		}
	}
	if a := content.Attributes["cmdline"]; a != nil {
		k.Cmdline, _ = l.attrString(a)
	}
	return k
}

func validModuleName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (l *loader) decodeArtifact(b *hcl.Block) *Artifact {
	content, diags := b.Body.Content(artifactSchema)
	l.diags = append(l.diags, diags...)
	art := &Artifact{Name: b.Labels[0], DeclRange: b.DefRange}
	if !addrs.ValidName(art.Name) {
		l.errorf(b.LabelRanges[0], "Invalid block name", "%q is not a valid artifact name: use letters, digits, underscores and dashes.", art.Name)
	}
	if a := content.Attributes["source"]; a != nil {
		art.Source = l.attrSource(a, content.Attributes["sha256"])
	}
	if a := content.Attributes["dest"]; a != nil {
		if s, ok := l.attrString(a); ok {
			if err := checkGuestPath(s); err != nil {
				l.errorf(a.Expr.Range(), "Invalid destination path", "dest is where the artifact goes in the image: %v.", err)
			} else {
				art.Dest = s
			}
		}
	}
	if a := content.Attributes["file"]; a != nil {
		if s, ok := l.attrString(a); ok {
			if err := checkRelPattern(s); err != nil {
				l.errorf(a.Expr.Range(), "Invalid file path", "file names a file inside the artifact's archive: %v.", err)
			} else {
				art.File = s
			}
		}
	}
	if a := content.Attributes["extract"]; a != nil {
		art.Extract, _ = l.attrBool(a)
		if art.Extract && art.Source != nil && !art.Source.IsArchive() {
			l.errorf(a.Expr.Range(), "Source is not an archive",
				"extract = true unpacks an archive, but %q is not one: extract works with npm, deb and OCI sources and with url and file sources ending in %s.", art.Source.Raw, strings.Join(archiveExts, ", "))
		}
		if art.Extract && art.File != "" {
			l.errorf(a.Expr.Range(), "Conflicting arguments",
				"extract = true unpacks the whole archive under dest; file picks one file out of it. Use one or the other.")
		}
	}
	if a := content.Attributes["keep_special"]; a != nil {
		art.KeepSpecial, _ = l.attrBool(a)
		if art.KeepSpecial && !art.Extract {
			l.errorf(a.Expr.Range(), "Conflicting arguments",
				"keep_special keeps the setuid and setgid bits, devices and file capabilities of an extracted archive; it needs extract = true (a single file's mode is set with mode).")
		}
	}
	if a := content.Attributes["mode"]; a != nil {
		if art.Extract {
			l.errorf(a.Expr.Range(), "Conflicting arguments", "mode sets the mode of a single file; an extracted archive keeps the modes it holds.")
		} else {
			art.Mode, _ = l.attrMode(a)
		}
	}
	art.UID = l.attrID(content.Attributes["uid"])
	art.GID = l.attrID(content.Attributes["gid"])
	return art
}

func (l *loader) attrID(a *hcl.Attribute) int {
	n, _ := l.attrInt(a, 0, maxID)
	return int(n)
}

// validUserName reports whether s is a portable user or group name.
func validUserName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || i > 0 && (c == '-' || c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func (l *loader) decodeUser(b *hcl.Block) *User {
	content, diags := b.Body.Content(userSchema)
	l.diags = append(l.diags, diags...)
	u := &User{Name: b.Labels[0], DeclRange: b.DefRange}
	switch {
	case u.Name == "root":
		l.errorf(b.LabelRanges[0], "Reserved user name", "Every image has the root user; declare other users only.")
		return nil
	case !validUserName(u.Name):
		l.errorf(b.LabelRanges[0], "Invalid user name",
			"%q is not a valid user name: lower-case letters, digits, _ and -, starting with a letter or _, at most 32 characters.", u.Name)
		return nil
	}
	if a := content.Attributes["uid"]; a != nil {
		n, ok := l.attrInt(a, 0, maxID)
		if ok && n == 0 {
			l.errorf(a.Expr.Range(), "Invalid uid", "uid 0 is root; a user block declares a non-root user.")
			ok = false
		}
		if !ok {
			return nil
		}
		u.UID = int(n)
	}
	u.GID = u.UID
	if a := content.Attributes["gid"]; a != nil {
		if n, ok := l.attrInt(a, 0, maxID); ok {
			u.GID = int(n)
		}
	}
	u.Home = "/home/" + u.Name
	u.Shell = "/bin/sh"
	for _, f := range []struct {
		name string
		dst  *string
	}{{"home", &u.Home}, {"shell", &u.Shell}} {
		a := content.Attributes[f.name]
		if a == nil {
			continue
		}
		s, ok := l.attrString(a)
		if !ok {
			continue
		}
		if err := checkGuestPath(s); err != nil {
			l.errorf(a.Expr.Range(), "Invalid path", "%s: %v.", f.name, err)
			continue
		}
		*f.dst = s
	}
	if a := content.Attributes["groups"]; a != nil {
		items, _ := l.attrStrings(a)
		for _, it := range items {
			if !validUserName(it.Value) {
				l.errorf(it.Range, "Invalid group name", "%q is not a valid group name.", it.Value)
				continue
			}
			u.Groups = append(u.Groups, it.Value)
		}
	}
	return u
}

func (l *loader) decodeFile(b *hcl.Block) *File {
	content, diags := b.Body.Content(fileSchemaImage)
	l.diags = append(l.diags, diags...)
	f := &File{Path: b.Labels[0], Mode: 0o644, DeclRange: b.DefRange}
	if err := checkGuestPath(f.Path); err != nil {
		l.errorf(b.LabelRanges[0], "Invalid file path", "A file block is labelled with the file's path in the image: %v.", err)
		f.Path = ""
	} else if f.Path == "/" {
		l.errorf(b.LabelRanges[0], "Invalid file path", "A file block cannot replace the root directory.")
		f.Path = ""
	}
	if a := content.Attributes["content"]; a != nil {
		f.Content, _ = l.attrString(a)
	}
	if m, ok := l.attrMode(content.Attributes["mode"]); ok {
		f.Mode = m
	}
	f.UID = l.attrID(content.Attributes["uid"])
	f.GID = l.attrID(content.Attributes["gid"])
	return f
}
