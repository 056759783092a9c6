// Package provision runs an image's provision steps: it boots a sandbox
// of the image's built disk (package sandbox) whose egress is the
// current step's own rules and nothing else — no mounts, no secrets —
// runs each step as root in order, powers the guest off (the agent
// syncs its file systems first) and writes the disk the guest left as a
// self-contained qcow2 image.
//
// It implements image.Provisioner; package image decides when steps run
// and where their disk is cached, and package pipeline wires the two.
// It does not decide whether the result is reproducible: a provisioned
// disk is whatever the steps wrote (see docs/lockfile.md).
//
// Flattening the machine's copy-on-write overlay into one image needs
// qemu-img (as booting needs QEMU); the image written is then made by
// internal/qcow2 from the raw disk, so its layout is sbx's own.
//
// Entry point: (*Provisioner).Provision.
package provision
