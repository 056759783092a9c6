package qemu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// kvmDevice is the device through which QEMU uses KVM.
const kvmDevice = "/dev/kvm"

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// detectAccel decides whether KVM works: the device must open read-write,
// an x86 CPU must report vmx or svm, and a test guest must run to its end
// under KVM within timeout. It returns "" and a note when the device
// exists but one of these fails, and "" without a note when there is no
// device at all.
func detectAccel(ctx context.Context, b Binary, timeout time.Duration) (Accel, string) {
	if _, err := os.Stat(kvmDevice); err != nil {
		return "", ""
	}
	const using = "; using TCG"
	f, err := os.OpenFile(kvmDevice, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Sprintf("KVM present but unusable: %s does not open read-write for this user (%v); add the user to the device's group%s", kvmDevice, err, using)
	}
	f.Close()
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "386" {
		ok, err := cpuHasVirtualization("/proc/cpuinfo")
		if err != nil {
			return "", fmt.Sprintf("KVM present but unusable: cannot read the CPU flags: %v%s", err, using)
		}
		if !ok {
			return "", "KVM present but unusable: the host CPU reports neither vmx nor svm (nested virtualization is not available)" + using
		}
	}
	r := runAccelProbe(ctx, b.Path, AccelKVM, timeout)
	if !r.OK {
		return "", "KVM present but unusable: " + r.Detail + using
	}
	return AccelKVM, ""
}

// cpuHasVirtualization reports whether the "flags" of /proc/cpuinfo name
// Intel VT-x (vmx) or AMD-V (svm).
func cpuHasVirtualization(cpuinfo string) (bool, error) {
	f, err := os.Open(cpuinfo)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		for _, fl := range strings.Fields(val) {
			if fl == "vmx" || fl == "svm" {
				return true, nil
			}
		}
		// Every processor lists the same flags; the first says it.
		return false, nil
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("%s: %w", cpuinfo, err)
	}
	return false, fmt.Errorf("%s has no flags line", cpuinfo)
}
