# An eval-runner sandbox: Alpine with pinned Claude Code, Codex and the
# moltnet CLI. The guest sees one worktree (minus its secrets), reaches only
# the model APIs, and never holds a real credential: the host substitutes the
# token into requests to the hosts each secret names.
#
#   sbx validate examples/agent
#   sbx lock     examples/agent     # pins every source into sbx.lock.hcl
#   sbx plan     examples/agent

variable "claude_version" {
  description = "Claude Code release, as published to npm."
  default     = "2.1.332"
}

variable "codex_version" {
  description = "Codex CLI release, as published to npm."
  default     = "0.171.0"
}

variable "moltnet_version" {
  description = "moltnet CLI release tag, without the cli-v prefix."
  default     = "1.26.0"
}

image "agent" {
  platform = "linux/amd64"
  base     = "alpine:3.23" # the lock pins the digest
  size     = "4GiB"

  kernel {
    source = "deb:linux-image-6.1.0-57-amd64=6.1.192-3"
    file   = "boot/vmlinuz-*"
  }

  artifact "claude" {
    source = "npm:@anthropic-ai/claude-code-linux-x64-musl@${var.claude_version}"
    file   = "package/claude"
    dest   = "/usr/local/bin/claude"
    mode   = "0755"
  }

  artifact "codex" {
    source = "npm:@openai/codex@${var.codex_version}-linux-x64"
    file   = "package/vendor/x86_64-unknown-linux-musl/bin/codex"
    dest   = "/usr/local/bin/codex"
    mode   = "0755"
  }

  # No sha256 here: `sbx lock` records the digest of the first download
  # (trust on first use) and every later fetch must match it. Add
  # sha256 = "<64 hex digits>" to pin it in the spec as well.
  artifact "moltnet" {
    source = "https://github.com/getlarge/themoltnet/releases/download/cli-v${var.moltnet_version}/moltnet_linux_amd64.tar.gz"
    file   = "moltnet"
    dest   = "/usr/local/bin/moltnet"
    mode   = "0755"
  }

  user "agent" {
    uid = 501
  }

  file "/etc/motd" {
    content = "sbx eval sandbox\n"
  }
}

egress "llm" {
  allow = [
    "api.anthropic.com",
    "*.openai.com",
    "chatgpt.com",
  ]
}

# Claude Code reads its OAuth token from this variable and sends it as
# Authorization: Bearer. The guest gets a placeholder; the host puts the
# real token into requests to api.anthropic.com only.
secret "claude_oauth" {
  env    = "CLAUDE_CODE_OAUTH_TOKEN"
  hosts  = ["api.anthropic.com"]
  source = "env:CLAUDE_CODE_OAUTH_TOKEN"
}

# Codex reads its key from CODEX_API_KEY (with only OPENAI_API_KEY set,
# `codex exec` sends no key at all) and needs it only at api.openai.com;
# it also sends it to chatgpt.com's model list, which it can do without
# (docs/agents.md).
secret "codex_key" {
  env    = "CODEX_API_KEY"
  hosts  = ["api.openai.com"]
  source = "env:CODEX_API_KEY"
}

vfs "workspace" {
  mount "/workspace" {
    host   = "."
    access = "rw"
    hide   = [".env", ".env.*", ".git/config", "**/*.pem"]
    tmpfs  = ["node_modules"]
    owner  = "agent"
  }
}

sandbox "eval" {
  image   = image.agent
  vfs     = [vfs.workspace]
  egress  = [egress.llm]
  secrets = [secret.claude_oauth, secret.codex_key]
  user    = "agent"
  cpus    = 2
  memory  = "2GiB"

  # moltnet's own credentials stay on the host: no env source may put
  # them in the guest, and sbx exec -e refuses them.
  forbid_env = ["MOLTNET_*"]
}
