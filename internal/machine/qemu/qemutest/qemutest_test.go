package qemutest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

func TestCheck(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == qemutest.SkipEnv {
				return v
			}
			return ""
		}
	}
	found := func(string) (string, error) { return "/usr/bin/qemu-system-x86_64", nil }
	missing := func(name string) (string, error) { return "", errors.New("exec: " + name + ": not found") }

	for _, c := range []struct {
		name      string
		env       string
		look      func(string) (string, error)
		path      string
		skip, err string
	}{
		{name: "present", look: found, path: "/usr/bin/qemu-system-x86_64"},
		{name: "missing fails", look: missing,
			err: "qemu-system-x86_64 is not on PATH, and this test boots QEMU VMs. Install QEMU (Debian: apt-get install qemu-system-x86 qemu-utils; Fedora: dnf install qemu-kvm qemu-img; macOS: brew install qemu), or set SBX_SKIP_VM_TESTS=1 to skip the VM tests"},
		{name: "missing, opted out", env: "1", look: missing, skip: "SKIPPED: SBX_SKIP_VM_TESTS=1 skips the tests that boot QEMU VMs"},
		{name: "present, opted out", env: "1", look: found, skip: "SKIPPED: SBX_SKIP_VM_TESTS=1 skips the tests that boot QEMU VMs"},
		{name: "other value", env: "yes", look: missing, err: `SBX_SKIP_VM_TESTS="yes": set it to 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, skip, err := qemutest.Check(env(c.env), c.look)
			if path != c.path || skip != c.skip {
				t.Errorf("Check = %q, %q, %v; want %q, %q", path, skip, err, c.path, c.skip)
			}
			if (err == nil) != (c.err == "") || err != nil && !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("error %v, want %q", err, c.err)
			}
		})
	}
}
