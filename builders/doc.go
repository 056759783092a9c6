// Package builders groups the image-building subpackages, in the order a
// build uses them: recipe (an image's inputs and input hash), resolve
// (pinning those inputs for the lock), cache and fetch (verified inputs in a
// content-addressed store), archive and layers (reading archives and OCI
// layers), rootfs (the assembled tree), ext4 and qcow2 (the root disk),
// kernel, agentbin, cpio and initramfs (what the VM boots), gondolin (an
// export for Gondolin users) and image (the orchestration of all of them).
package builders
