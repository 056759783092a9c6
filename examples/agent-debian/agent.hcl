# An eval-runner sandbox built only from Debian packages and npm: a Debian
# root with bash, coreutils, git and the CA bundle, the glibc builds of
# Claude Code, the Codex CLI and the moltnet CLI pinned by URL and sha256.
# Packages come through the host's own apt configuration and the npm
# packages through the host's npm configuration, so a machine that reaches
# only a Debian mirror and an npm registry (or their caches) can build it.
#
#   sbx validate -var moltnet_sha256=<64 hex digits> examples/agent-debian
#   sbx lock     -var moltnet_sha256=<64 hex digits> examples/agent-debian
#   sbx build    -var moltnet_sha256=<64 hex digits> examples/agent-debian
#
# Three sandboxes share the image and the workspace; each reaches only its
# own provider and needs only its own credential on the host:
#
#   claude      Claude Code with CLAUDE_CODE_OAUTH_TOKEN (`claude setup-token`)
#   claude_api  Claude Code with ANTHROPIC_API_KEY
#   codex       Codex with CODEX_API_KEY
#
# The guest never holds a real credential: its variable holds a
# placeholder, and the host puts the real value into requests to the
# secret's hosts only (docs/egress.md). docs/agents.md says what each CLI
# calls and what this spec lets through.

variable "claude_version" {
  description = "Claude Code release, as published to npm."
  default     = "2.1.332"
}

variable "codex_version" {
  description = "Codex CLI release, as published to npm."
  default     = "0.171.0"
}

variable "moltnet_url" {
  description = "Where the moltnet CLI's release tarball is downloaded from."
  default     = "https://github.com/getlarge/themoltnet/releases/download/cli-v1.26.0/moltnet_linux_amd64.tar.gz"
}

# No default: the digest is what pins the release, so it is stated by
# whoever vouches for it (the release's checksums file, or sha256sum of a
# copy already checked).
variable "moltnet_sha256" {
  description = "SHA-256 of the tarball at moltnet_url, 64 hex digits."
  type        = string
}

variable "workspace" {
  description = "The host directory the agents work in, mounted at /workspace."
  default     = "."
}

# Where the model APIs are really reached, for a company gateway or a
# local test server: host name to IP:PORT. Each name keeps its own egress
# block's rules and secrets; each block below keeps only the names it
# allows (a mapping of a name no block allows would be unused, and
# validation warns about it).
variable "upstreams" {
  description = "Host name to IP:PORT overrides for the provider APIs."
  type        = map(string)
  default     = {}
}

# Certificate authorities, besides the system's roots, that the host
# trusts when it verifies the upstreams: PEM files in this directory.
variable "upstream_ca" {
  description = "Extra CA files (relative to this directory) for the upstreams' TLS."
  type        = list(string)
  default     = []
}

locals {
  anthropic_hosts = ["api.anthropic.com"]
  openai_hosts    = ["api.openai.com", "chatgpt.com"]
}

image "agent" {
  platform = "linux/amd64"
  size     = "3GiB" # Claude Code alone is a 400 MB executable

  # Debian's generic kernel: the lock follows the meta package to the
  # versioned package that holds it.
  kernel {
    source = "deb:linux-image-amd64"
    file   = "boot/vmlinuz-*"
  }

  # With no base image, the lock adds Debian's Essential and required
  # packages to these (what debootstrap's minbase would install) and pins
  # the whole closure. libc6 is named because the claude below is the
  # glibc build. The installer writes /etc/ssl/certs/ca-certificates.crt
  # itself, as ca-certificates' postinst would (docs/packages.md).
  packages = ["bash", "coreutils", "git", "ca-certificates", "libc6"]

  # Each is checked at build: present, executable, and for claude its
  # ELF interpreter and libraries resolvable from the Debian packages.
  executables = ["bash", "git", "claude", "codex", "moltnet"]

  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64@${var.claude_version}"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }

  # A static musl executable: it needs nothing from the image.
  artifact "codex" {
    source = "npm:@openai/codex@${var.codex_version}-linux-x64"
    file   = "package/vendor/x86_64-unknown-linux-musl/bin/codex"
    dest   = "/usr/local/bin/codex"
    mode   = "0755"
  }

  artifact "moltnet" {
    source = var.moltnet_url
    sha256 = var.moltnet_sha256
    file   = "moltnet"
    dest   = "/usr/local/bin/moltnet"
    mode   = "0755"
  }

  # Claude Code refuses to skip its permission prompts as root, and the
  # agents have no business being root anyway.
  user "agent" {
    uid   = 1000
    shell = "/bin/bash"
  }
}

egress "anthropic" {
  allow = local.anthropic_hosts
  hosts = { for name, addr in var.upstreams : name => addr if contains(local.anthropic_hosts, name) }
  ca    = var.upstream_ca

  # The model API only. Claude Code also fetches settings, feature flags
  # and a bootstrap document from this host and posts telemetry to it,
  # all with the credential attached; refused with a 403, it carries on.
  request "api.anthropic.com" {
    methods = ["POST"]
    paths   = ["/v1/messages", "/v1/messages/**"]
  }
}

egress "openai" {
  allow = local.openai_hosts
  hosts = { for name, addr in var.upstreams : name => addr if contains(local.openai_hosts, name) }
  ca    = var.upstream_ca

  # The Responses API only: a WebSocket (the GET upgrade) or, when that
  # is refused, POST with an event stream. The key cannot be spent on
  # other API paths.
  request "api.openai.com" {
    methods = ["GET", "POST"]
    paths   = ["/v1/responses", "/v1/responses/**"]
  }
}

# Claude Code sends this as Authorization: Bearer.
secret "claude_oauth" {
  env    = "CLAUDE_CODE_OAUTH_TOKEN"
  hosts  = local.anthropic_hosts
  source = "env:CLAUDE_CODE_OAUTH_TOKEN"
}

# Claude Code sends this as x-api-key. A secret goes in Authorization
# (Bearer, or Basic's password) and in the headers it names, each time as
# the header's whole value; anywhere else the request is refused.
secret "anthropic_key" {
  env     = "ANTHROPIC_API_KEY"
  hosts   = local.anthropic_hosts
  headers = ["x-api-key"]
  source  = "env:ANTHROPIC_API_KEY"
}

# Codex reads its key from CODEX_API_KEY and sends it as Authorization:
# Bearer to the API host.
secret "codex_key" {
  env    = "CODEX_API_KEY"
  hosts  = ["api.openai.com"]
  source = "env:CODEX_API_KEY"
}

# The worktree the agent edits, minus what must not leave the host. Its
# files are the agent user's inside the guest.
vfs "workspace" {
  mount "/workspace" {
    host   = var.workspace
    access = "rw"
    hide   = [".env", ".env.*", "**/*.pem", "**/*.key"]
    owner  = "agent"
  }
}

sandbox "claude" {
  image   = image.agent
  vfs     = [vfs.workspace]
  egress  = [egress.anthropic]
  secrets = [secret.claude_oauth]
  user    = "agent"
  cpus    = 2
  memory  = "2GiB"

  # moltnet's own credentials stay on the host: no env source may put
  # them in the guest, and sbx exec -e refuses them.
  forbid_env = ["MOLTNET_*"]
}

sandbox "claude_api" {
  image      = image.agent
  vfs        = [vfs.workspace]
  egress     = [egress.anthropic]
  secrets    = [secret.anthropic_key]
  user       = "agent"
  cpus       = 2
  memory     = "2GiB"
  forbid_env = ["MOLTNET_*"]
}

sandbox "codex" {
  image      = image.agent
  vfs        = [vfs.workspace]
  egress     = [egress.openai]
  secrets    = [secret.codex_key]
  user       = "agent"
  cpus       = 2
  memory     = "2GiB"
  forbid_env = ["MOLTNET_*"]
}
