package operation

import (
	"testing"

	"github.com/sbx-dev/sbx/internal/build/resolve"
	"github.com/sbx-dev/sbx/internal/lockfiles"
)

// TestLockChangeLineDeb shows a Debian pin as PACKAGE=VERSION, so that a
// kernel named by its meta package shows the package it was followed to.
func TestLockChangeLineDeb(t *testing.T) {
	kernel := &lockfiles.Pin{Source: "deb:linux-image-amd64", Kind: "deb", Version: "6.1.192-3", SHA256: "ab", Filename: "linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"}
	got := LockChangeLine(resolve.LockChange{Image: "quickstart", Key: "kernel", New: kernel})
	want := "+ image.quickstart kernel: deb:linux-image-amd64 → linux-image-6.1.0-57-amd64=6.1.192-3 sha256:ab"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	npm := &lockfiles.Pin{Source: "npm:tool@^1", Kind: "npm", Version: "1.2.0", Integrity: "sha512-x", SHA256: "cd", Filename: "tool_1.2.0_x.deb"}
	if got, want := PinIdentity(npm), "1.2.0 sha512-x"; got != want {
		t.Errorf("npm pin: %q, want %q", got, want)
	}
}
