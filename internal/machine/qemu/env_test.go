package qemu

import (
	"slices"
	"testing"
)

func TestEnvironmentKeepsOnlyWhatQEMUNeeds(t *testing.T) {
	environ := []string{
		"PATH=/bin", "HOME=/home/u", "TMPDIR=/tmp/u", "PATH=/usr/bin:/bin",
		"API_TOKEN=secret", "AWS_SECRET_ACCESS_KEY=secret", "SSH_AUTH_SOCK=/tmp/agent",
		"LANG=de_DE.UTF-8", "LD_PRELOAD=/tmp/evil.so", "QEMU_AUDIO_DRV=none", "NOEQUALS",
	}
	got := Environment(environ)
	want := []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "TMPDIR=/tmp/u", "LC_ALL=C"}
	if !slices.Equal(got, want) {
		t.Errorf("Environment = %q, want %q", got, want)
	}
	if got := Environment(nil); !slices.Equal(got, []string{"LC_ALL=C"}) {
		t.Errorf("Environment(nil) = %q, want only LC_ALL=C", got)
	}
}
