# The sandbox of TestEgressInVM. @UPSTREAM@ is replaced with the address of
# the test's HTTPS server, which answers for every name mapped here.
image "dev" {
  platform = "linux/amd64"
  size     = "1GiB"

  kernel {
    source = "file:./kernel.deb"
    file   = "boot/vmlinuz-*"
  }

  packages    = ["curl", "git", "ca-certificates"]
  executables = ["curl", "git"]

  user "agent" {
    uid = 1000
  }
}

egress "test" {
  allow = ["api.test", "other.test", "git.test", "ro.test"]
  hosts = {
    "api.test"   = "@UPSTREAM@"
    "other.test" = "@UPSTREAM@"
    "git.test"   = "@UPSTREAM@"
    "ro.test"    = "@UPSTREAM@"
  }
  ca = ["upstream-ca.pem"]

  request "git.test" {
    git_push = ["refs/heads/agent/*"]
  }

  request "ro.test" {
    methods = ["GET"]
  }
}

secret "token" {
  env    = "TOKEN"
  hosts  = ["api.test", "git.test"]
  source = "env:SBX_EGRESS_TEST_TOKEN"
}

sandbox "dev" {
  image   = image.dev
  user    = "agent"
  egress  = [egress.test]
  secrets = [secret.token]
  cpus    = 1
  memory  = "512MiB"
}
