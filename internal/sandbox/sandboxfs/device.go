package sandboxfs

import "io"

// device is a mount served by a virtio-fs device.
type device struct {
	srv   io.Closer // the mount's file server (*vfs.Server on Linux)
	tag   string
	guest string
}
