# A quickstart that needs no container registry: the root filesystem is
# unpacked from Debian packages and the kernel is Debian's, both fetched
# through the host's own apt configuration (so a local mirror or cache
# works), and the Codex CLI comes through the host's npm configuration.
#
#   sbx validate examples/quickstart
#   sbx lock     examples/quickstart
#   sbx build    examples/quickstart
#
# The Debian packages name no version: `sbx lock` pins the version the
# host's apt offers today (its candidate) with the .deb's sha256, and
# keeps that pin until `sbx lock -upgrade`. The kernel names Debian's
# meta package, which the lock follows to the versioned kernel package it
# depends on (linux-image-6.1.0-57-amd64, say), so the spec does not go
# stale when a security update renames the kernel's ABI. No lock file is
# committed here: Debian's mirrors stop serving a version once it is
# replaced, so a committed pin would soon name a package no mirror has.

variable "codex_version" {
  description = "Codex CLI release, as published to npm."
  default     = "0.171.0"
}

locals {
  # busybox-static ships only /bin/busybox; its package scripts would make
  # the applet links, and here the image makes them itself.
  applets = [
    "sh", "ash", "ls", "cat", "cp", "mv", "rm", "ln", "mkdir", "rmdir",
    "chmod", "chown", "touch", "pwd", "echo", "printf", "test", "[",
    "grep", "sed", "awk", "find", "xargs", "head", "tail", "wc", "sort",
    "uniq", "cut", "tr", "tee", "diff", "env", "id", "whoami", "hostname",
    "uname", "date", "sleep", "ps", "kill", "df", "du", "free", "mount",
    "umount", "tar", "gzip", "gunzip", "vi", "less", "which", "readlink",
    "basename", "dirname", "true", "false", "clear", "wget", "nslookup",
  ]
}

image "quickstart" {
  platform = "linux/amd64"
  size     = "1GiB"

  # Debian's generic kernel (which has 9p's fd transport): the lock
  # follows the meta package to the versioned package that holds it.
  kernel {
    source = "deb:linux-image-amd64"
    file   = "boot/vmlinuz-*"
  }

  # A statically linked busybox provides the shell and core utilities.
  artifact "busybox" {
    source  = "deb:busybox-static"
    dest    = "/"
    extract = true
  }

  # Mozilla's CA certificates, one PEM file each under
  # /usr/share/ca-certificates/mozilla/. The package's postinst, which
  # would link them into /etc/ssl/certs and concatenate them into
  # /etc/ssl/certs/ca-certificates.crt, is not run: the image has the
  # certificates but no bundle and no hashed links.
  artifact "ca_certificates" {
    source  = "deb:ca-certificates"
    dest    = "/"
    extract = true
  }

  artifact "codex" {
    source = "npm:@openai/codex@${var.codex_version}-linux-x64"
    file   = "package/vendor/x86_64-unknown-linux-musl/bin/codex"
    dest   = "/usr/local/bin/codex"
    mode   = "0755"
  }

  symlinks = merge(
    { for a in local.applets : "/bin/${a}" => "busybox" },
    { "/usr/bin/env" = "/bin/busybox" },
  )

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
