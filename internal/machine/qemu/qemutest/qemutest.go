package qemutest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// SkipEnv names the environment variable that skips the tests that boot
// QEMU: set to "1" they skip, saying so; unset, a missing QEMU fails them.
const SkipEnv = "SBX_SKIP_VM_TESTS"

// Emulator is the QEMU system emulator the tests boot.
const Emulator = "qemu-system-x86_64"

// Install is the command that installs what the VM tests need on Debian.
const Install = "apt-get install qemu-system-x86 qemu-utils"

// Check looks up the emulator with getenv and lookPath (os.Getenv and
// exec.LookPath when nil). It returns the emulator's path when the tests
// may run; a non-empty skip, the reason to print, when SBX_SKIP_VM_TESTS
// is 1; and otherwise an error saying what to install and how to opt out.
func Check(getenv func(string) string, lookPath func(string) (string, error)) (path, skip string, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if v := getenv(SkipEnv); v == "1" {
		return "", fmt.Sprintf("SKIPPED: %s=1 skips the tests that boot QEMU VMs", SkipEnv), nil
	} else if v != "" {
		return "", "", fmt.Errorf("%s=%q: set it to 1 to skip the tests that boot QEMU VMs, or unset it to run them", SkipEnv, v)
	}
	path, err = lookPath(Emulator)
	if err != nil {
		return "", "", fmt.Errorf("%s is not on PATH, and this test boots QEMU VMs. Install QEMU (Debian: %s; Fedora: dnf install qemu-kvm qemu-img; macOS: brew install qemu), or set %s=1 to skip the VM tests",
			Emulator, Install, SkipEnv)
	}
	return path, "", nil
}

// Require returns the emulator's path when the test may boot VMs. It
// skips the test when SBX_SKIP_VM_TESTS is 1 and fails it when the
// emulator is missing otherwise (see Check).
func Require(t testing.TB) string {
	t.Helper()
	path, skip, err := Check(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	return path
}
