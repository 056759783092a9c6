# The sandbox of TestRequestRulesInVM: busybox and the rawreq program,
# three hosts mapped to the test's HTTPS server (@UPSTREAM@), each
# narrowed by one kind of request rule.
image "box" {
  platform = "linux/amd64"
  size     = "256MiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
  }

  artifact "busybox" {
    source  = "file:./busybox.deb"
    dest    = "/"
    extract = true
  }

  artifact "rawreq" {
    source = "file:./rawreq"
    dest   = "/usr/local/bin/rawreq"
    mode   = "0755"
  }

  symlinks = { "/bin/sh" = "busybox", "/bin/cat" = "busybox", "/bin/id" = "busybox" }

  user "agent" {
    uid = 1000
  }
}

egress "rules" {
  allow = ["paths.test", "methods.test", "git.test"]
  hosts = {
    "paths.test"   = "@UPSTREAM@"
    "methods.test" = "@UPSTREAM@"
    "git.test"     = "@UPSTREAM@"
  }
  ca = ["upstream-ca.pem"]

  request "paths.test" {
    paths = ["/public/**"]
  }

  request "methods.test" {
    methods = ["GET", "POST"]
  }

  request "git.test" {
    git_push = ["refs/heads/agent/*"]
  }
}

sandbox "rules" {
  image  = image.box
  user   = "agent"
  egress = [egress.rules]
  cpus   = 1
  memory = "512MiB"
}
