# The sandbox of TestGRPCInVM: busybox and the grpccall program, api.test
# mapped to the test's gRPC server (@UPSTREAM@), its paths narrowed to
# the health check and the feed service, the secret sent as a bearer
# token.
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

  artifact "grpccall" {
    source = "file:./grpccall"
    dest   = "/usr/local/bin/grpccall"
    mode   = "0755"
  }

  symlinks = { "/bin/sh" = "busybox" }

  user "agent" {
    uid = 1000
  }
}

egress "grpc" {
  allow = ["api.test"]
  hosts = {
    "api.test" = "@UPSTREAM@"
  }
  ca = ["upstream-ca.pem"]

  request "api.test" {
    paths = ["/grpc.health.v1.Health/Check", "/sbx.test.Feed/*"]
  }
}

secret "token" {
  env    = "TOKEN"
  hosts  = ["api.test"]
  source = "env:SBX_GRPC_TEST_TOKEN"
}

sandbox "grpc" {
  image   = image.box
  user    = "agent"
  egress  = [egress.grpc]
  secrets = [secret.token]
  cpus    = 1
  memory  = "512MiB"
}
