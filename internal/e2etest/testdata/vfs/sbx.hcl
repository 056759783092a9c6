# The sandbox of TestWorkspaceMountInVM: Debian's git, and the host
# directory ./work mounted read-write with every kind of rule.
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
    hide     = [".env", ".git/config", "**/*.pem"]
    readonly = ["vendor", "tools"]
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
