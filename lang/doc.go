// Package lang reads sbx specs: the *.hcl files of one directory, written
// in HCL, evaluated into one typed, validated Config with source ranges.
//
// The entry point is Load(dir, Options). It always returns a Config (with
// Sources set, so diagnostics print with snippets) and hcl.Diagnostics
// whose subjects point at file:line:column. ParseSource, ParseSize,
// ParseMode and ParsePlatform parse the small languages inside strings;
// Format lays out HCL source canonically for sbx fmt. Suggest finds the
// declared name closest to a misspelt one, for the "Did you mean" of a
// reference to an undeclared block or value (and of the CLI's commands).
//
// Package lang does not fetch or pin sources (package internal/build/resolve
// does), does not read or write the lock file (lockfiles), does not compare
// configurations with state (plan), and never reads a secret's value (the
// egress side does, at run time). It touches the file system only to read
// the configuration, var files, files named by file() and filesha256(),
// and the CA files an egress block's ca names (read the same confined way);
// it reads the environment only through Options.Environ.
//
// # Files
//
// Every file in the directory whose name ends in .hcl is part of the
// configuration, in name order, except the lock file sbx.lock.hcl, var
// files named *.vars.hcl, and names starting with "." or "#". Files in
// subdirectories are not read. All files form one configuration: a block
// in one file can refer to a block in another, and block names are unique
// across files.
//
// The directory may be an untrusted checkout, so configuration is read
// only from inside it: a file may be a symbolic link that leads (through
// every link on the way) to a regular file inside the directory, but a
// link that leaves the directory, a dangling link, and anything that is
// not a regular file (a named pipe, a device, /proc/…) are errors naming
// the file, and nothing is read from them, so no diagnostic quotes their
// content. Var files named by Options.VarFiles are read wherever they are.
//
// # Blocks
//
//	variable "NAME" {          an input; see Variables below
//	  type        = string     string, number, bool, list(T), map(T), set(T), object({...}), tuple([...]), any
//	  default     = "value"    a constant; without it the variable must be set
//	  description = "..."
//	  sensitive   = false      hide the value when printing
//	  validation {             any number of rules
//	    condition     = length(var.NAME) > 0   may refer to var.NAME only
//	    error_message = "..."
//	  }
//	}
//
//	locals {                   named values; any number of locals blocks
//	  NAME = expression        may refer to var.*, local.*
//	}
//
//	image "NAME" {                       what goes into one VM image
//	  platform = "linux/amd64"           os/arch[/variant]; os is linux; default linux/amd64
//	  base     = "alpine:3.23"           an OCI image (see Sources); omitted: an empty root
//	  size     = "4GiB"                  root file system size; default chosen by the builder
//	  env      = { LANG = "C.UTF-8" }    environment of every process in the image
//	  host_paths = ["/opt/models"]       host directories outside the configuration
//	                                     directory that file: and oci-layout: sources may read
//
//	  kernel {                           at most one
//	    source  = "deb:linux-image-amd64=6.12.38-1"
//	    sha256  = "<64 hex>"             optional, not for OCI sources
//	    file    = "boot/vmlinuz-*"       the kernel's path inside an archive source
//	    modules = ["9pnet_fd"]           extra modules to load
//	    cmdline = "console=ttyS0"
//	  }
//	  artifact "NAME" {                  a file (or an unpacked archive) placed in the image
//	    source  = "npm:@scope/pkg@1.2.3" required
//	    sha256  = "<64 hex>"             optional, not for OCI sources
//	    file    = "package/bin/tool"     a path inside an archive source
//	    dest    = "/usr/local/bin/tool"  required; absolute and clean
//	    extract = false                  true: unpack the whole archive under dest
//	    keep_special = false             with extract: keep setuid/setgid bits, devices
//	                                     and file capabilities (dropped by default)
//	    mode    = "0755"                 an octal string; not with extract
//	    uid     = 0
//	    gid     = 0
//	  }
//	  user "NAME" {                      a non-root account
//	    uid    = 501                     required, not 0, unique in the image
//	    gid    = 501                     default: uid
//	    home   = "/home/NAME"            the default
//	    shell  = "/bin/sh"               the default
//	    groups = ["wheel"]
//	  }
//	  file "/ABSOLUTE/PATH" {            a literal file
//	    content = "text"                 required; file("motd.txt") reads one
//	    mode    = "0644"                 the default
//	    uid     = 0
//	    gid     = 0
//	  }
//	  provision "NAME" {                 run as root in a VM of the built disk, in order;
//	                                     the disk it leaves is the image's (provision.go)
//	    run     = ["sh", "-c", "..."]    the command, or:
//	    script  = "..."                  run as /bin/sh -ec SCRIPT
//	    env     = { LANG = "C" }
//	    timeout = "10m"                  the default
//	    egress {                         the step's own rules, as an egress block's;
//	      allow = ["mirror.example"]     none: it reaches nothing
//	    }
//	  }
//	}
//
//	egress "NAME" {                                    what a sandbox may reach
//	  allow = ["api.anthropic.com", "*.openai.com"]    HTTP and HTTPS host patterns
//	  passthrough = ["pinned.example.com"]             allowed, and spliced without inspection
//	  tcp   = ["github.com:22"]                        raw TCP, host:port
//	  hosts = { "api.test" = "127.0.0.1:8443" }        pin names to addresses
//	  ca    = ["certs/corp-root.pem"]                  upstream CAs, PEM files in the directory
//	  request "github.com" {                           narrows an allow entry of this block
//	    methods  = ["GET", "POST"]
//	    paths    = ["/org/repo.git/**"]
//	    git_push = ["refs/heads/agent/*"]
//	  }
//	}
//
//	secret "NAME" {                      a credential brokered by the host
//	  env    = "API_TOKEN"               required; the guest sees a placeholder here
//	  hosts  = ["api.example.com"]       required; the value is sent only to these
//	  source = "env:API_TOKEN"           optional; env:NAME or file:PATH, read on the host when the user's
//	                                     bindings file binds nothing for the secret; a command:CMD here is
//	                                     never run (a warning): only the bindings file's commands run
//	  headers    = ["x-api-key"]         headers whose whole value is the credential (Authorization always is)
//	  plain_http = ["api.test:80"]       exact destinations the value may cross unencrypted (a local fixture)
//	  oauth {                            optional: an OAuth login whose tokens are in the JSON file source names
//	    token_url     = "https://auth.example.com/oauth/token"   required; its host must be allowed by egress
//	    refresh_field = "refresh_token"  the refresh request's JSON or form field (default refresh_token)
//	    client_id     = "app_..."        for refreshes the host makes by itself
//	    scope         = "user:inference" optional; the scope those refreshes ask for (RFC 6749 scope tokens)
//	    access_token  = "tokens.access_token"    required; dotted paths into the file
//	    refresh_token = "tokens.refresh_token"   required
//	    id_token      = "tokens.id_token"        optional
//	    refreshed_at  = "last_refresh"           optional; set on write-back
//	    expires_at    = "claudeAiOauth.expiresAt"  optional; the access token's expiry, set on write-back
//	    expires_at_unit = "ms"           required with expires_at: "s" or "ms" since the Unix epoch
//	  }
//	  file {                             optional (needs oauth): the file with placeholders, in the guest
//	    path  = "/home/agent/.codex/auth.json"   required; absolute
//	    mode  = "0600"                   default 0600; no group or other bits
//	    owner = "agent"                  default root
//	  }
//	  body {                             any number: a body field the value goes in (not with aws or oauth)
//	    host       = "auth.example.com"  required; exact, covered by hosts
//	    path       = "/oauth/token"      required; exact request path
//	    form_field = "client_secret"     one of: a urlencoded form field,
//	    json_field = "credentials.key"   or a dotted path to a JSON string
//	  }
//	  websocket {                        optional: substituted in the guest's WebSocket text messages to hosts
//	    json_field = "auth.token"        optional; without it, a message that is the placeholder
//	  }
//	}
//
//	vfs "NAME" {
//	  mount "/GUEST/PATH" {              any number of mounts
//	    host     = "."                   required; relative to the configuration directory, or absolute
//	    access   = "ro"                  "ro" (default) or "rw"
//	    hide     = [".env", "**/*.pem"]  patterns relative to the mount root
//	    readonly = ["Makefile"]
//	    tmpfs    = ["node_modules"]
//	    git_metadata = "protected"       default; "writable" lets the guest write git's config and hooks
//	    owner    = "agent"               root or a user of the sandbox's image
//	  }
//	}
//
//	sandbox "NAME" {
//	  image   = image.agent              required; a reference, not a string
//	  vfs     = [vfs.workspace]          lists of references
//	  egress  = [egress.llm]
//	  secrets = [secret.token]
//	  user    = "agent"                  default root; root or a user of the image
//	  cpus    = 2                        default 1
//	  memory  = "2GiB"                   default 1GiB, at least 64MiB
//	  env     = { CI = "1" }
//	  forbid_env = ["MOLTNET_*"]         names that never reach the guest's environment
//	}
//
//	output "NAME" {
//	  value       = local.x
//	  description = "..."
//	  sensitive   = false
//	}
//
// # References and expressions
//
// Expressions are HCL's: strings with ${...} templates, lists, maps, for
// expressions, conditionals and function calls. Values can refer to
// var.NAME and local.NAME. Blocks are referred to as image.NAME, vfs.NAME,
// egress.NAME and secret.NAME, and only as a sandbox's image, vfs, egress
// and secrets arguments: a block reference is not a value. Every reference
// is checked: a reference to something undeclared is an error at the
// reference, and locals that depend on each other in a loop are an error
// naming the loop.
//
// Functions are those Terraform users know from the cty standard library
// (upper, lower, format, join, split, replace, trimspace, concat, merge,
// length, contains, keys, values, lookup, min, max, coalesce, tostring,
// tonumber, jsonencode, jsondecode, regex, try, can and others) plus
// sha256, base64encode, base64decode, startswith, endswith, and file,
// filesha256 and fileexists, which take a path relative to the
// configuration directory and refuse paths that leave it. No function
// reads the environment or the network.
//
// # Variables
//
// A variable's value comes from, in increasing order of precedence (a
// later source overrides an earlier one):
//
//  1. its default;
//  2. the environment variable SBX_VAR_NAME;
//  3. -var-file files, in the order given (a later file wins);
//  4. -var NAME=VALUE options, in the order given (a later one wins).
//
// This is Terraform's order. Values given as strings (-var and the
// environment) are taken literally for string, number and bool variables
// and converted to the declared type; for list, map and object types they
// are parsed as HCL, as in -var 'hosts=["a.example.com"]'. A variable with
// no default that no source sets is an error. A -var for an undeclared
// variable is an error; a var file entry for one is a warning (var files
// may be shared between configurations); an SBX_VAR_ variable for one is
// ignored. Var files hold NAME = VALUE lines in HCL, or a JSON object when
// the file name ends in .json.
//
// # Sources
//
// Sources name where bytes come from; each kind says which version it
// means, and the lock file pins the exact bytes:
//
//	alpine:3.23, registry.example.com/o/i@sha256:…     an OCI image (tag or digest required); also oci:REF
//	oci-layout:./dir[:tag|@sha256:…]      a local OCI image layout
//	npm:@scope/name@1.2.3                 an npm package (version, range or dist-tag)
//	https://host/path                     a download (https only)
//	file:./path                           a local file
//	deb:name, deb:name=1.2-3, deb:name>=1.2,<<2  a Debian package (any version, an exact one, or relations)
//
// Local sources (file: and oci-layout:) name paths relative to the
// configuration directory and are read inside it: an absolute path, or one
// that leaves the directory through "..", is an error at the source unless
// the image lists a directory holding it in host_paths (Source.HostPath
// then names that entry), and builders open every local source through
// Source.LocalRoot, so that a symbolic link leading out of the directory
// (or out of the host_paths entry) is refused too. A plan lists every new
// or changed local input as widening: the guest sees that host file.
//
// Sizes are whole numbers of bytes or of KiB, MiB, GiB or TiB (powers of
// 1024); "4GB" and "4G" are rejected as ambiguous. File modes are octal
// strings ("0755"): HCL reads a bare 0755 as the decimal number 755, so a
// number is an error.
//
// # Validation
//
// Beyond types and references, Load checks: host patterns, TCP
// destinations and address mappings; request blocks (each for an allow
// entry of its own block that is not passthrough, once; methods as package
// policy checks them, path and ref patterns as package policy/match
// compiles them for the egress engine); mount hide, readonly and tmpfs
// patterns as policy/match compiles them for the file server (so a spec
// that validates starts); that CA files hold PEM
// certificates and nothing else; that every host a sandbox's secret is
// sent to is allowed by that sandbox's egress (a secret never widens egress
// by itself) and not passthrough; that sandbox users and mount owners exist in the image; that
// guest paths are absolute and clean; that extract is used on archives;
// sha256 digests; unique names, uids, file destinations, mount paths and
// secret environment variables; that no image env name is a secret's
// variable in a sandbox using both; that no name a sandbox's forbid_env
// matches is set by its env, its image's env or its secrets (each refused
// where it is written, naming the pattern); and CPU and memory limits.
//
// # The sandbox policy
//
// Sandbox.Policy is the union of the egress, secret and vfs blocks a
// sandbox names, in canonical order: allow rules by pattern, tcp rules by
// destination, host mappings by name, secrets by name, mounts by guest
// path, each mount's hide, readonly and tmpfs patterns sorted, duplicates
// dropped (a rule declared twice keeps the origin of the first block the
// sandbox names). Allow rules for one pattern from several egress blocks
// merge into one, the least restricted winning (policy.MergeAllow), with a
// warning where that allows more than any of them alone; it also warns
// about passthrough and request rules that a broader pattern of the same
// sandbox makes moot (see policy.RulesFor). CAs are sorted by path. Two blocks that map one name to different addresses, or
// mount the same guest path, are an error. Each rule's Origin names its
// block, file (relative to the configuration directory) and line.
package lang
