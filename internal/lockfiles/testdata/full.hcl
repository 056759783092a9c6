# This file is maintained automatically by "sbx lock".
# Manual edits may be lost in future updates.

image "agent" {
  platform   = "linux/amd64"
  input_hash = "sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"

  input "artifact.claude" {
    source    = "npm:@anthropic-ai/claude-code-linux-x64-musl@2.1.3"
    kind      = "npm"
    version   = "2.1.3"
    integrity = "sha512-q83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq83vqw=="
    sha256    = "e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5"
  }

  input "artifact.layout" {
    source   = "oci-layout:./layout@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
    kind     = "oci-layout"
    digest   = "sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
    manifest = "sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
  }

  input "artifact.moltnet" {
    source = "https://example.com/moltnet_linux_amd64.tar.gz"
    kind   = "url"
    sha256 = "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4"
  }

  input "artifact.odd" {
    source = "https://example.com/a\"b\\c$${x}%%{y}"
    kind   = "url"
    sha256 = "e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5"
  }

  input "artifact.tool" {
    source = "file:./bin/tool"
    kind   = "file"
    sha256 = "e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5"
  }

  input "base" {
    source   = "registry.example.com/library/alpine:3.23"
    kind     = "oci"
    digest   = "sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
    manifest = "sha256:c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
  }

  input "kernel" {
    source   = "deb:linux-image-amd64=6.12.57-1"
    kind     = "deb"
    version  = "6.12.57-1"
    sha256   = "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4"
    filename = "linux-image-amd64_6.12.57-1_amd64.deb"
  }

  outputs = {
    disk      = "sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
    initramfs = "sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
    kernel    = "sha256:c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
  }
}

image "bare" {
  platform   = "linux/arm64/v8"
  input_hash = "sha256:c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
}
