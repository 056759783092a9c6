package lang

import (
	"github.com/sbx-dev/sbx/platform"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/policy"
)

// Config is one evaluated configuration: every *.hcl file of a directory,
// with variables and locals substituted, references checked and values
// validated. Maps are keyed by block name. Every element keeps the source
// range it was declared at so later stages can point at it.
type Config struct {
	// Dir is the configuration directory, absolute. Relative host paths in
	// the spec are resolved against it.
	Dir string
	// Files are the file names that were read, relative to Dir, sorted.
	Files []string
	// Sources holds every parsed file (spec files and var files) by the
	// name used in diagnostics, so callers can print diagnostics with
	// snippets. It is set even when loading fails.
	Sources map[string]*hcl.File

	Variables map[string]*Variable
	Locals    map[string]*Local
	Images    map[string]*Image
	Egress    map[string]*Egress
	Secrets   map[string]*Secret
	VFS       map[string]*VFS
	Sandboxes map[string]*Sandbox
	Outputs   map[string]*Output
}

// Variable is an input variable and the value it took.
type Variable struct {
	Name        string
	Description string
	// Value is the final value after the default, SBX_VAR_ environment
	// variables, -var-file and -var (in that order of precedence, the last
	// winning), as plain Go values: string, bool, int64 for whole numbers
	// (float64 otherwise), []any, map[string]any, nil for null. A
	// sensitive variable's value is here too; it is the caller that hides
	// it when printing.
	Value any
	// Set says where the value came from: "default", "env", "file:NAME",
	// "flag".
	Set       string
	Sensitive bool
	// Type is the declared type constraint as written in HCL ("string",
	// "list(string)", …); "any" when the variable declares no type.
	Type      string
	DeclRange hcl.Range
}

// Local is a named local value.
type Local struct {
	Name      string
	Value     any
	DeclRange hcl.Range
}

// Output is a named value shown after apply.
type Output struct {
	Name        string
	Value       any
	Description string
	// Sensitive outputs are not shown unless asked for.
	Sensitive bool
	DeclRange hcl.Range
}

// Platform is an OCI platform, e.g. linux/amd64 or linux/arm64/v8.
type Platform = platform.Platform

// Image is an image block: what goes into one bootable VM image.
type Image struct {
	Name     string
	Platform Platform
	// Base is the root filesystem the rest is layered onto: an OCI image.
	// Nil means an empty root (artifacts then provide everything).
	Base *Source
	// Size is the size of the root filesystem in bytes; 0 means the default
	// chosen by the builder.
	Size      int64
	Kernel    *Kernel
	Artifacts []*Artifact // in declaration order; names unique
	Users     []*User     // in declaration order; names and uids unique
	Files     []*File     // in declaration order; paths unique
	// Symlinks maps a link's absolute path in the image to its target
	// (e.g. "/bin/sh" → "busybox"). Links are owned by root.
	Symlinks map[string]string
	Env      map[string]string
	// HostPaths are the host directories outside the configuration
	// directory that the image's file: and oci-layout: sources may read
	// from, cleaned, as written (absolute, or relative to Config.Dir with
	// a leading ".."). Empty means every local source lies inside the
	// configuration directory.
	HostPaths []string
	// Packages are the image's package set (see packages.go).
	Packages ImagePackages
	// Provision are the image's provision steps, in declaration order
	// (provision.go): run after the disk is built, their result is the
	// image's disk.
	Provision []*Provision

	DeclRange hcl.Range
}

// Addr returns image.NAME.
func (i *Image) Addr() addrs.Ref { return addrs.ImageRef(i.Name) }

// Kernel says where the guest kernel and its modules come from.
type Kernel struct {
	Source *Source
	// File is the kernel image's path inside an archive source (e.g.
	// "boot/vmlinuz-*" inside a .deb); empty for a bare file.
	File string
	// Modules are extra module names to load beyond the builder's defaults.
	Modules   []string
	Cmdline   string
	DeclRange hcl.Range
}

// Artifact places a file (or a whole archive's tree) into the image.
type Artifact struct {
	Name   string
	Source *Source
	// File is the path inside an archive source; empty means the whole
	// downloaded blob is the file (or, with Extract, the whole archive).
	File string
	// Dest is an absolute, clean path in the image.
	Dest string
	// Extract unpacks the whole archive under Dest instead of placing one
	// file (Debian packages as a base, for example).
	Extract bool
	// KeepSpecial keeps, when extracting, what an extracted archive is
	// otherwise stripped of: setuid and setgid bits, character and block
	// devices, and file capabilities (the security.capability extended
	// attribute).
	KeepSpecial bool
	// Mode is the file mode (permission and setuid/setgid/sticky bits);
	// 0 means 0644 for files and 0755 for executables named in File.
	Mode      uint32
	UID       int
	GID       int
	DeclRange hcl.Range
}

// User is a user account created in the image.
type User struct {
	Name      string
	UID       int
	GID       int // defaults to UID
	Home      string
	Shell     string
	Groups    []string
	DeclRange hcl.Range
}

// File is a literal file written into the image.
type File struct {
	Path      string // absolute, clean
	Content   string
	Mode      uint32 // default 0644
	UID       int
	GID       int
	DeclRange hcl.Range
}

// SourceKind says how a source is fetched and pinned.
type SourceKind string

// Source kinds.
const (
	SourceOCI       SourceKind = "oci"        // registry reference
	SourceOCILayout SourceKind = "oci-layout" // local OCI image layout directory
	SourceNPM       SourceKind = "npm"        // npm package tarball
	SourceURL       SourceKind = "url"        // https URL
	SourceFile      SourceKind = "file"       // local file
	SourceDeb       SourceKind = "deb"        // Debian package through apt
)

// Source is a parsed source string as written in a spec. Ref and Version
// are kind-specific:
//
//	oci         alpine:3.23     Ref = the reference
//	oci-layout  oci-layout:./dir[@sha256:…|:tag]  Ref = dir, Version = tag or digest
//	npm         npm:@scope/pkg@1.2.3              Ref = package name, Version = version or range
//	url         https://host/path                 Ref = the URL
//	file        file:./path                       Ref = path
//
// Relative paths (file, oci-layout) stay relative, cleaned, and mean
// relative to Config.Dir, so that two copies of one configuration in
// different directories compare equal. Such a path is read inside the
// configuration directory, or inside the image's host_paths entry named
// by HostPath: never through ".." or a symbolic link out of it (see
// LocalRoot).
//
//	deb         deb:busybox-static=1:1.36.1-9     Ref = package, Version = the exact Debian version
//	            deb:busybox-static>=1:1.35,<<1:1.37  Version = the relations as written
//	            deb:busybox-static                 Version = "" (any version)
//
// A deb source's Version is read with DebRelations.
type Source struct {
	Kind    SourceKind
	Raw     string // as written
	Ref     string
	Version string
	// SHA256 is the digest declared in the spec (hex), if any.
	SHA256 string
	// HostPath is, for a file or oci-layout source outside the
	// configuration directory, the entry of the image's host_paths that
	// holds it (as Image.HostPaths has it); empty for a path inside the
	// configuration directory and for every other kind.
	HostPath string
	// Vars are the input variables the source's expression refers to,
	// directly or through locals, sorted: where its value comes from,
	// for messages that say which variable to change. Empty for a
	// literal.
	Vars  []string
	Range hcl.Range
}

// Egress is an egress block: hosts and ports a sandbox may reach.
//
// Allow holds one rule per pattern, in the order first written: the allow
// and passthrough entries, with the block's request rules applied.
type Egress struct {
	Name  string
	Allow []policy.AllowRule
	TCP   []policy.TCPRule
	Hosts []policy.HostMapping
	// CAs are the upstream CAs the block's ca attribute names, read and
	// checked when the configuration is loaded.
	CAs       []policy.CA
	DeclRange hcl.Range
}

// Secret is a brokered credential. The value is never read by lang.
type Secret struct {
	Name  string
	Env   string
	Hosts []policy.HostPattern
	// Headers are the headers, lower case, whose whole value is the
	// credential, besides Authorization's Bearer token and Basic password.
	Headers []string
	// PlainHTTP are the exact destinations the value may cross
	// unencrypted (a local fixture).
	PlainHTTP []policy.HostPort
	// Source is where the spec says the host reads the value:
	// "env:NAME", "file:PATH", "command:CMD", or empty when the spec
	// leaves it to the user's bindings file (package bindings, which
	// also decides which source is used: never a spec's command).
	Source string
	// AWS, when the secret has an aws block, makes it an AWS credential
	// re-signed on the host.
	AWS *policy.AWSCredential
	// OAuth and File are the secret's oauth and file blocks, nil when
	// absent (see policy.OAuth and policy.SecretFile).
	OAuth *policy.OAuth
	File  *policy.SecretFile
	// Body and WebSocket are the secret's body and websocket blocks:
	// where in request bodies and WebSocket messages its value goes
	// (see policy.BodyField and policy.WebSocketField).
	Body      []policy.BodyField
	WebSocket *policy.WebSocketField
	DeclRange hcl.Range
}

// VFS is a vfs block: host directories a sandbox sees.
type VFS struct {
	Name      string
	Mounts    []policy.Mount
	DeclRange hcl.Range
}

// Sandbox is a sandbox block.
type Sandbox struct {
	Name    string
	Image   string   // image block name
	VFS     []string // vfs block names, in order
	Egress  []string // egress block names, in order
	Secrets []string // secret block names, in order
	User    string
	CPUs    int
	Memory  int64 // bytes
	Env     map[string]string
	// Policy is the effective policy from the named egress, secret and vfs
	// blocks, in canonical order.
	Policy    policy.Sandbox
	DeclRange hcl.Range
}

// Addr returns sandbox.NAME.
func (s *Sandbox) Addr() addrs.Ref { return addrs.SandboxRef(s.Name) }

// CommandEnv returns the environment of the commands run in sandbox sb,
// as "KEY=value" entries: its image's env, then the sandbox's (which
// overrides it), each sorted by key. Later entries win where a key
// repeats, as in a process environment.
func (c *Config) CommandEnv(sb *Sandbox) []string {
	var env []string
	if img := c.Images[sb.Image]; img != nil {
		for _, k := range slices.Sorted(maps.Keys(img.Env)) {
			env = append(env, k+"="+img.Env[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sb.Env)) {
		env = append(env, k+"="+sb.Env[k])
	}
	return env
}
