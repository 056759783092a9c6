# The sandbox of TestEvalInVM and bench/evalbench: the busybox image of
# package machinetest (the Debian kernel and busybox-static, local files
# only) with the host directory ./work mounted read-write, an .env and
# every key hidden and a scratch directory in memory.
locals {
  applets = ["sh", "cat", "echo", "id", "ls", "rm", "mkdir", "touch", "mv",
  "cp", "chmod", "ln", "sed", "grep", "sleep", "head", "wc", "sha256sum", "env", "true", "false"]
}

image "box" {
  platform = "linux/amd64"
  size     = "256MiB"

  # Under TCG on a loaded host the kernel's IO-APIC timer check can fail
  # and panic the boot ("IO-APIC + timer doesn't work"); with 8 boots at
  # once that is more than a rare event. QEMU's timer works: skip the
  # check.
  kernel {
    source  = "file:./kernel.deb"
    file    = "boot/vmlinuz-*"
    cmdline = "no_timer_check"
  }

  artifact "busybox" {
    source  = "file:./busybox.deb"
    dest    = "/"
    extract = true
  }

  symlinks = { for a in local.applets : "/bin/${a}" => "busybox" }

  user "agent" {
    uid = 1000
  }
}

vfs "workspace" {
  mount "/workspace" {
    host   = "work"
    access = "rw"
    hide   = [".env", "**/*.pem"]
    tmpfs  = ["scratch"]
  }
}

sandbox "evalbox" {
  image  = image.box
  user   = "agent"
  vfs    = [vfs.workspace]
  cpus   = 1
  memory = "256MiB"
}
