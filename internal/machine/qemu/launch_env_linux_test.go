//go:build linux

package qemu

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/platform"
)

// TestLaunchDoesNotPassTheUsersEnvironment starts a real (paused) QEMU
// with a secret in this process's environment and reads the environment
// the running emulator has: the secret must not be in it.
func TestLaunchDoesNotPassTheUsersEnvironment(t *testing.T) {
	host := probeHost(t)
	const secret = "sbx-test-token-4b1d"
	t.Setenv("API_TOKEN", secret)
	dir := socketDir(t)
	spec := VMSpec{
		Name:        "env",
		Platform:    platform.Platform{OS: "linux", Architecture: "amd64"},
		CPUs:        1,
		MemoryBytes: 64 << 20,
		QMPSocket:   filepath.Join(dir, "qmp.sock"),
		Paused:      true,
		QEMULog:     filepath.Join(dir, "qemu.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Launch(ctx, spec, host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	env, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte(secret)) || bytes.Contains(env, []byte("API_TOKEN=")) {
		t.Errorf("QEMU's environment holds the user's API_TOKEN:\n%s", bytes.ReplaceAll(env, []byte{0}, []byte{'\n'}))
	}
	if !bytes.Contains(env, []byte("LC_ALL=C\x00")) {
		t.Errorf("QEMU's environment lacks LC_ALL=C:\n%s", bytes.ReplaceAll(env, []byte{0}, []byte{'\n'}))
	}
}
