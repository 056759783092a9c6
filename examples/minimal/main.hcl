# The smallest useful spec: one image and one sandbox that boots it. With no
# egress, vfs or secret blocks the sandbox reaches no host and sees no host
# files.

image "shell" {
  base = "alpine:3.23"
}

sandbox "shell" {
  image = image.shell
}
