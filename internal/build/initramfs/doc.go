// Package initramfs writes the initramfs an sbx guest boots from: a newc
// cpio archive holding the guest agent as /init, the device nodes the
// kernel needs before devtmpfs (/dev/console, /dev/null), the mount points
// the agent uses, and the kernel modules the guest loads with their
// manifest (/lib/sbx/modules.list, in load order). The layout is the one
// package internal/proto/bootproto describes, which the agent reads.
//
// The output is reproducible: the same options give the same bytes
// (every entry carries Options.Epoch, owners are root, order is
// canonical). It is plain, uncompressed cpio, which QEMU's -initrd and
// the kernel take as it is; compress it where a consumer needs that
// (internal/build/gondolin frames it in legacy LZ4 for Gondolin).
//
// It does not build the agent (package internal/build/agentbin), choose or read
// kernel modules (package internal/build/kernel; KernelModules connects the
// two), or write the root file system (package internal/build/ext4).
//
// The entry point is Write.
package initramfs
