// Package imageinfo is the contract between the image builder and the guest
// agent for what a root filesystem says about itself: the JSON document
// written to /etc/sbx/image.json (Info), the fixed paths the agent looks at
// (the document, the per-install CA certificate), and the guest's network
// addressing on the link to the host's userspace network stack.
//
// The builder (package internal/build/rootfs) writes the document with Encode and
// the guest agent reads it at boot with Parse; the host's network stack
// answers DNS and routes at the addresses given here. Keeping them in one
// leaf package that imports nothing of sbx lets both sides, including the
// static guest binary, depend on it without pulling in the builders.
//
// It holds data and their encoding only and performs no I/O. Assembling the
// root filesystem is package internal/build/rootfs's; configuring the guest at
// boot is the agent's.
//
// The entry points are Info, Encode and Parse.
package imageinfo
