# This file is maintained automatically by "sbx lock".
# Manual edits may be lost in future updates.

image "quickstart" {
  platform   = "linux/amd64"
  input_hash = "sha256:0cde37a5597b4c7c8749205bceab72b07378c9f09a2928c8c3151f53b48efc59"

  input "artifact.busybox_static" {
    source   = "deb:busybox-static"
    kind     = "deb"
    version  = "1:1.35.0-4+deb12u1+b1"
    sha256   = "f16ce82e037924d549a3d94ede55ea927d10a50c8677b34b7447728fb039fe9d"
    filename = "busybox-static_1%3a1.35.0-4+deb12u1+b1_amd64.deb"
  }

  input "artifact.ca_certificates" {
    source   = "deb:ca-certificates>=20230311,<<20260000"
    kind     = "deb"
    version  = "20250419~deb12u2"
    sha256   = "f16ce82e037924d549a3d94ede55ea927d10a50c8677b34b7447728fb039fe9d"
    filename = "ca-certificates_20250419~deb12u2_amd64.deb"
  }

  input "kernel" {
    source   = "deb:linux-image-amd64"
    kind     = "deb"
    version  = "6.1.192-3"
    sha256   = "85219aa7ef351722a51c37b674e30612479e0dc86397ceaad706964a4983ba9e"
    filename = "linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"
  }
}
