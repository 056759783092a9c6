// Package vfsproto is the contract between the host's file server
// (package vfs) and the guest's mount (package guest/vfsmount): the
// virtio-serial port each mount travels on, the largest 9P message, and
// the mount options the guest's 9p client takes. The wire protocol
// itself is 9P2000.L.
//
// It has no dependencies so that the guest agent can import it.
package vfsproto
