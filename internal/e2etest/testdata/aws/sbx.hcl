# The sandbox of TestAWSSigV4InVM: busybox and the awsclient program,
# two AWS-like hosts mapped to the test's fake service (@UPSTREAM@), and
# an AWS credential the host re-signs their requests with.
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

  artifact "awsclient" {
    source = "file:./awsclient"
    dest   = "/usr/local/bin/awsclient"
    mode   = "0755"
  }

  symlinks = { "/bin/sh" = "busybox", "/bin/cat" = "busybox", "/bin/env" = "busybox" }

  user "agent" {
    uid = 1000
  }
}

egress "aws" {
  allow = ["s3.aws.test", "sts.aws.test"]
  hosts = {
    "s3.aws.test"  = "@UPSTREAM@"
    "sts.aws.test" = "@UPSTREAM@"
  }
  ca = ["upstream-ca.pem"]
}

secret "aws" {
  env    = "AWS_ACCESS_KEY_ID"
  hosts  = ["s3.aws.test", "sts.aws.test"]
  source = "env:SBX_AWS_TEST_CREDENTIALS"
  aws {
    services = ["s3", "sts"]
    regions  = ["us-east-1"]
  }
}

sandbox "aws" {
  image   = image.box
  user    = "agent"
  egress  = [egress.aws]
  secrets = [secret.aws]
  cpus    = 1
  memory  = "512MiB"
}
