// Package virtq is the device side of virtio 1.x split virtqueues
// (VIRTIO_F_VERSION_1; no packed rings) over guest memory this process
// has mapped.
//
// Memory translates guest-physical addresses to host byte slices over a
// fixed set of mapped regions. A range that lies outside every region,
// or starts in one region and runs past its end, is an error; no
// address arithmetic can overflow. Every slice it returns has its
// capacity cut at its length, so appending to one never reaches memory
// beyond the range.
//
// Queue is one split virtqueue: the descriptor table, the driver
// ("available") ring and the device ("used") ring, located and
// bounds-checked once by New. Pop takes the next available descriptor
// chain; Push returns one to the driver and publishes the used index;
// NeedNotify says whether the driver asked to be interrupted.
//
// The driver is a hostile guest kernel that writes the rings while they
// are read, so a Queue trusts nothing it reads from them:
//
//   - The available index may move arbitrarily; more than Size entries
//     outstanding is an error.
//   - Each descriptor is copied out of the ring once and only the copy is
//     validated and used, so the guest cannot change a field between its
//     check and its use.
//   - A chain may hold at most Size descriptors, or, behind an indirect
//     descriptor, at most as many as its table holds; an index at or
//     past the end of its table is an error, so loops end.
//   - An indirect table (VIRTQ_DESC_F_INDIRECT) is honoured only if the
//     feature was negotiated (Config.Indirect), only in a chain's head,
//     never with VIRTQ_DESC_F_NEXT, never nested; its length is a
//     non-zero multiple of 16 of at most Size entries and it lies in
//     memory.
//   - A chain lists the buffers the device reads before those it writes;
//     a readable descriptor after a writable one is an error, as is a
//     chain whose buffers add up to more than Config.MaxChainBytes.
//
// An error from Pop means the ring is broken: the queue must not be used
// further (the device needs a reset). Nothing here panics on ring
// contents.
//
// The ring indices are read and written with sync/atomic: Pop loads the
// available index before it reads the entries it covers, Push writes a
// used element before it stores the used index, and NeedNotify loads the
// driver's flags after that store. EVENT_IDX (VIRTIO_RING_F_EVENT_IDX)
// is not implemented: the driver's VIRTQ_AVAIL_F_NO_INTERRUPT flag is the
// only notification suppression, and the device never suppresses the
// driver's kicks (it leaves the used ring's flags zero).
//
// The slices in a Chain alias guest memory: they are valid only while the
// mapping lives, and the guest can change their bytes at any time. Code
// handling a chain reads each field it validates once, and does not keep
// the slices after the chain has been pushed.
//
// Pop is called from one goroutine at a time, and so is Push (with
// NeedNotify); the two may run concurrently.
//
// Package vhostuser drives queues for a vhost-user device; this package
// knows nothing of sockets or of what the buffers mean.
package virtq
