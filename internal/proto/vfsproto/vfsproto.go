package vfsproto

import (
	"fmt"
	"strings"
	"time"
)

// MaxMsize is the largest 9P message the host serves and the guest
// mounts with: Linux's fd transport allows up to 1 MiB; half of that
// keeps the host's per-request buffers small and costs little
// throughput over a virtio-serial port.
const MaxMsize = 512 << 10

// How long the guest waits for one mount. The kernel's mount(2) of a
// 9p file system returns only once the host has answered its version
// and attach requests; a guest whose mount has not returned within
// MountTimeout ends the attempt (the relay is killed, the kernel's
// mount fails), and makes at most MountAttempts in all (a second one
// only when its request never reached the port: package
// guest/vfsmount). The host's wait for a configure request that mounts
// is bounded above what these add up to.
const (
	MountTimeout  = 30 * time.Second
	MountAttempts = 2
)

// PortPrefix begins the name of every mount's virtio-serial port.
const PortPrefix = "sbx.vfs."

// PortName is the name of the virtio-serial port that carries the
// sandbox's i-th mount (in the order of policy.Sandbox.Mounts).
func PortName(i int) string { return fmt.Sprintf("%s%d", PortPrefix, i) }

// Cache modes of the guest's 9p client.
const (
	// CacheMmap caches nothing but what shared writable mappings need,
	// so that host edits are seen at once and mmap works (linkers map
	// their output).
	CacheMmap = "mmap"
	// CacheNone caches nothing; shared writable mappings fail.
	CacheNone = "none"
	// CacheLoose caches data and metadata: fast, but host edits may be
	// missed until the guest drops its caches.
	CacheLoose = "loose"
)

// MountData is the option string of the guest's mount(2) of a 9p file
// system over an fd transport: rfd and wfd are the descriptor numbers in
// the mounting process, msize at most MaxMsize.
func MountData(rfd, wfd int, msize uint32, cache string) (string, error) {
	if msize == 0 || msize > MaxMsize {
		msize = MaxMsize
	}
	switch cache {
	case "":
		cache = CacheMmap
	case CacheMmap, CacheNone, CacheLoose:
	default:
		return "", fmt.Errorf("9p cache mode %q: use %s, %s or %s", cache, CacheMmap, CacheNone, CacheLoose)
	}
	opts := []string{
		"trans=fd",
		fmt.Sprintf("rfdno=%d", rfd),
		fmt.Sprintf("wfdno=%d", wfd),
		"version=9p2000.L",
		fmt.Sprintf("msize=%d", msize),
		// The guest's kernel checks permissions against the owner and
		// modes the host reports; the host enforces the path rules.
		"access=client",
		"cache=" + cache,
	}
	return strings.Join(opts, ","), nil
}
