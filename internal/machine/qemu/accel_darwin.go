package qemu

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

func bootID() (string, error) {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return "", err
	}
	return time.Unix(tv.Unix()).UTC().Format(time.RFC3339Nano), nil
}

// detectAccel reports HVF when the kernel supports the Hypervisor
// framework (sysctl kern.hv_support). QEMU itself must have been built
// with HVF, which every macOS package of QEMU is.
func detectAccel(ctx context.Context, b Binary, timeout time.Duration) (Accel, string) {
	v, err := unix.SysctlUint32("kern.hv_support")
	if err != nil || v != 1 {
		return "", "the Hypervisor framework is not available (sysctl kern.hv_support); using TCG"
	}
	return AccelHVF, ""
}
