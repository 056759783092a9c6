# A quickstart that needs no container registry: the root filesystem is
# unpacked from Debian packages and the kernel is Debian's, both fetched
# through the host's own apt configuration (so a local mirror or cache
# works), and the Codex CLI comes through the host's npm configuration.
#
#   sbx validate examples/quickstart
#   sbx lock     examples/quickstart
#   sbx plan     examples/quickstart

variable "codex_version" {
  description = "Codex CLI release, as published to npm."
  default     = "0.171.0"
}

image "quickstart" {
  platform = "linux/amd64"
  size     = "1GiB"

  kernel {
    source = "deb:linux-image-6.1.0-57-amd64=6.1.192-3"
    file   = "boot/vmlinuz-*"
  }

  # A statically linked busybox provides the shell and core utilities.
  artifact "busybox" {
    source  = "deb:busybox-static=1:1.35.0-4+deb12u1+b1"
    dest    = "/"
    extract = true
  }

  artifact "codex" {
    source = "npm:@openai/codex@${var.codex_version}-linux-x64"
    file   = "package/vendor/x86_64-unknown-linux-musl/bin/codex"
    dest   = "/usr/local/bin/codex"
    mode   = "0755"
  }

  user "dev" {
    uid = 1000
  }
}

egress "openai" {
  allow = ["*.openai.com"]
}

secret "openai_key" {
  env    = "OPENAI_API_KEY"
  hosts  = ["api.openai.com"]
  source = "env:OPENAI_API_KEY"
}

vfs "project" {
  mount "/work" {
    host   = "."
    access = "ro"
    hide   = [".env", ".env.*"]
    tmpfs  = ["target"]
  }
}

sandbox "dev" {
  image   = image.quickstart
  vfs     = [vfs.project]
  egress  = [egress.openai]
  secrets = [secret.openai_key]
  user    = "dev"
  cpus    = 1
  memory  = "1GiB"
}
