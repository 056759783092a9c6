// Package vhostuser is the back-end (device) side of the vhost-user
// protocol (QEMU's docs/interop/vhost-user.rst), serving virtqueues whose
// requests a Device handles — for sbx, the virtiofs device QEMU's
// vhost-user-fs-pci exposes, whose FUSE requests another package handles.
//
// The entry point is Serve, which runs one connection: a connected unix
// stream socket whose other end QEMU holds as a vhost-user chardev (one
// end of a socket pair given to QEMU as "-chardev socket,fd=N", or a
// connection accepted on a listening path). For a descriptor, make the
// connection with net.FileConn.
//
// What the back-end negotiates:
//
//   - Virtio features: VIRTIO_F_VERSION_1 (required for a queue to start), VIRTIO_RING_F_INDIRECT_DESC,
//     VHOST_USER_F_PROTOCOL_FEATURES and the device's own (Options.Features).
//     No EVENT_IDX, no packed rings, no IOMMU, no logging.
//   - Protocol features: MQ and REPLY_ACK only. Nothing that opens a
//     channel from the back-end to QEMU (SLAVE_REQ), shares more memory
//     (DAX, inflight) or asks for config space, dirty logging or status.
//   - Requests: GET/SET_FEATURES, GET/SET_PROTOCOL_FEATURES, SET_OWNER,
//     RESET_OWNER, GET_QUEUE_NUM, SET_MEM_TABLE, SET_VRING_NUM, _ADDR,
//     _BASE, GET_VRING_BASE, SET_VRING_KICK, _CALL, _ERR and _ENABLE.
//     Anything else (GET_CONFIG included: QEMU's vhost-user-fs answers
//     config reads from its own properties and never sends it) ends the
//     connection with an error.
//
// What QEMU 7.2 sends for vhost-user-fs-pci (recorded by the tests in
// qemu_test.go and from a Linux 6.1 guest probing the device):
//
//   - At realize: GET_FEATURES, GET_PROTOCOL_FEATURES,
//     SET_PROTOCOL_FEATURES (MQ|REPLY_ACK, all that is offered),
//     GET_QUEUE_NUM, SET_OWNER, GET_FEATURES again, then SET_VRING_CALL
//     and SET_VRING_ERR for each queue (1 + num-request-queues). No
//     GET_CONFIG, no memory table, nothing that needs a guest.
//   - When the guest's driver sets DRIVER_OK: SET_VRING_CALL per queue
//     (masked notifiers), SET_FEATURES (VERSION_1 | PROTOCOL_FEATURES |
//     INDIRECT_DESC from a Linux guest), SET_MEM_TABLE with NEED_REPLY
//     (one region for all guest RAM when it is one memfd), then per queue
//     SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ADDR, SET_VRING_KICK; then
//     SET_VRING_ENABLE 1 per queue, and SET_VRING_CALL per queue while
//     the queues run (the notifiers unmasked).
//   - When the device stops (reset, power off): SET_VRING_ENABLE 0 per
//     queue, GET_VRING_BASE per queue, SET_VRING_CALL per queue.
//
// Rings follow the protocol's life cycle: a queue starts when its kick
// descriptor arrives and it is enabled (rings start disabled once
// VHOST_USER_F_PROTOCOL_FEATURES is acknowledged, and SET_VRING_ENABLE
// enables them), and stops at GET_VRING_BASE, which waits until every
// chain the queue handed out has come back and replies with the index it
// stopped at. A new memory table stops the running queues, replaces the
// mappings and starts them again.
//
// Ring addresses arrive as QEMU's own virtual addresses and are
// translated through the memory table's userspace addresses; descriptor
// buffer addresses are guest-physical (package virtq translates them).
//
// The front-end (QEMU) is trusted no more than needed and the guest not
// at all: every size in a message is bounded before anything is
// allocated (a payload at most 512 bytes, at most 8 memory regions and 8
// descriptors per message, queue sizes powers of two up to 32768, ring
// indices below Options.Queues), a memory region must lie inside its
// file (mapping past the end would fault on access), regions must not
// overlap, and a malformed request ends the connection with an error,
// never a panic; the connection is then shut down, so that QEMU, which
// waits for some replies holding its global lock, sees it end instead
// of freezing the machine. What the guest chooses through QEMU never
// ends the connection: a guest that breaks a ring stops that queue, and
// one that lays a queue out so that it cannot be served (no
// VIRTIO_F_VERSION_1, a size that is not a power of two, rings
// misaligned or outside its memory, where QEMU hands over a bounce
// buffer) has that queue not started; either way the error descriptor
// is signalled, the other queues and the connection go on, and the
// guest's reset starts over.
//
// Each started queue has a goroutine that waits on its kick eventfd (and
// an eventfd of its own that stopping signals), pops chains and calls
// Device.Handle for each in a goroutine, at most Options.InFlight at
// once per queue; pushing a chain back, and signalling the call eventfd
// when the driver wants an interrupt, is serialised per queue. A Device
// must not keep the chain's slices after Handle returns: after
// GET_VRING_BASE or a new memory table, and when Serve returns, the
// memory is no longer touched, or mapped.
//
// The memory QEMU shares must not shrink under the mapping: an access
// to a page past the end of its file faults (SIGBUS), which ends the
// whole process. Each region's file is sealed against shrinking
// (F_SEAL_SHRINK) before it is mapped, so it must be a memfd made with
// MFD_ALLOW_SEALING or one already sealed so; any other is refused. The
// guest has no way to shrink it, and QEMU never does.
package vhostuser
