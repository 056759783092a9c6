package pipeline

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/sandbox/sandboxfs"
	"github.com/sbx-dev/sbx/policy"
)

// TestReplaceMountDirs checks StartOptions.MountDirs: a named mount is
// served from the replacement, the others keep their directory, and a
// guest path no mount has or a relative directory is an error.
func TestReplaceMountDirs(t *testing.T) {
	mounts := func() []sandboxfs.Mount {
		return []sandboxfs.Mount{
			{Policy: policy.Mount{Guest: "/workspace"}, HostDir: "/home/u/repo"},
			{Policy: policy.Mount{Guest: "/data"}, HostDir: "/srv/data"},
		}
	}
	m := mounts()
	if err := replaceMountDirs(m, map[string]string{"/workspace": "/tmp/eval/.work/3/0/"}); err != nil {
		t.Fatal(err)
	}
	if m[0].HostDir != "/tmp/eval/.work/3/0" || m[1].HostDir != "/srv/data" {
		t.Errorf("mounts after the replacement: %+v", m)
	}
	for want, dirs := range map[string]map[string]string{
		"no workspace mount at /nope": {"/workspace": "/tmp/x", "/nope": "/tmp/y"},
		"not absolute":                {"/data": "rel/dir"},
	} {
		m := mounts()
		if err := replaceMountDirs(m, dirs); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want %q", dirs, err, want)
		}
	}
	if err := replaceMountDirs(mounts(), nil); err != nil {
		t.Errorf("no replacement: %v", err)
	}
}
