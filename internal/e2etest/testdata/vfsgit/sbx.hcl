# The sandbox of TestGitMetadataInVM: Debian's git, and the host's work
# tree ./work mounted read-write with the rules docs/vfs.md used to
# recommend for it (the .git/config hidden, the hooks read-only), which
# by themselves did not keep the guest from redirecting the host's git.
image "dev" {
  platform = "linux/amd64"
  size     = "1GiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
  }

  packages    = ["git"]
  executables = ["git"]

  user "agent" {
    uid = 1000
  }
}

vfs "workspace" {
  mount "/workspace" {
    host     = "work"
    access   = "rw"
    hide     = [".git/config"]
    readonly = [".git/hooks"]
    tmpfs    = ["scratch"]
  }
}

sandbox "dev" {
  image  = image.dev
  user   = "agent"
  vfs    = [vfs.workspace]
  cpus   = 1
  memory = "512MiB"
}
