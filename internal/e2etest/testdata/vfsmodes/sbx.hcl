# The sandbox of TestGuestModesInVM: the busybox image of package
# machinetest (the Debian kernel and busybox-static, local files only)
# with the host directory ./work mounted read-write; tools/ holds the
# test's helper and is read-only, scratch/ lives in memory; the git
# protection is off (see the mount).
locals {
  applets = ["sh", "cat", "echo", "id", "ls", "rm", "mkdir", "touch", "mv",
    "cp", "chmod", "ln", "stat", "test", "[", "find", "sed", "grep", "head",
  "wc", "sort", "tr", "true", "false"]
}

image "box" {
  platform = "linux/amd64"
  size     = "256MiB"

  # As testdata/eval: QEMU's timer works under TCG; skip the kernel's
  # IO-APIC timer check, which a loaded host can fail.
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
    host     = "work"
    access   = "rw"
    readonly = ["tools"]
    tmpfs    = ["scratch"]
    # The git protection is off, so that the guest may chmod .git and
    # its hooks at all: this test holds the mode mask alone to its
    # promise (TestGitMetadataInVM shows .git is read-only by default).
    git_metadata = "writable"
  }
}

sandbox "modes" {
  image  = image.box
  user   = "agent"
  vfs    = [vfs.workspace]
  cpus   = 2
  memory = "256MiB"
}
