// Package virtqtest plays a virtio driver in tests: it lays out split
// virtqueues in a byte slice standing for guest memory the way Linux's
// virtio_ring does (descriptor table, then the available ring, then the
// used ring), adds request chains, direct or through indirect tables,
// and reads back what the device returned. It can also write raw
// descriptors and ring entries for tests of hostile rings.
//
// It is test support, imported only by tests. The entry point is
// NewDriver.
package virtqtest
