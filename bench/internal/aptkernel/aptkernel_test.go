package aptkernel

import "testing"

func TestFromShow(t *testing.T) {
	for _, c := range []struct {
		out, pkg, version string
		ok                bool
	}{
		{"Package: linux-image-amd64\nDepends: linux-image-6.1.0-28-amd64 (= 6.1.119-1)\n", "linux-image-6.1.0-28-amd64", "6.1.119-1", true},
		{"Depends: initramfs-tools (>= 0.120), linux-image-6.12.9-amd64 (= 6.12.9-1), kmod\n", "linux-image-6.12.9-amd64", "6.12.9-1", true},
		{"Depends: linux-image-6.1.0-28-amd64 (>= 6.1)\n", "", "", false},
		{"Recommends: linux-image-6.1.0-28-amd64 (= 6.1.119-1)\n", "", "", false},
		{"", "", "", false},
	} {
		pkg, version, err := fromShow(c.out)
		if (err == nil) != c.ok || pkg != c.pkg || version != c.version {
			t.Errorf("fromShow(%q) = %q, %q, %v; want %q, %q, ok %v", c.out, pkg, version, err, c.pkg, c.version, c.ok)
		}
	}
}
