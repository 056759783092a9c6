package bootproto

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFindPort(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	write(PortsDir+"/vport0p1/name", ControlPort+"\n")
	write("dev/vport0p1", "")

	// The agent port appears later, its name a moment after its device.
	go func() {
		time.Sleep(50 * time.Millisecond)
		write(PortsDir+"/vport0p2/name", "")
		write("dev/vport0p2", "")
		time.Sleep(50 * time.Millisecond)
		write(PortsDir+"/vport0p2/name", AgentPort+"\n")
	}()
	dev, err := FindPort(ctx, root, AgentPort, 5*time.Second, 5*time.Millisecond)
	if err != nil || dev != filepath.Join(root, "dev/vport0p2") {
		t.Fatalf("FindPort(agent) = %q, %v; want %s/dev/vport0p2", dev, err, root)
	}
	dev, err = FindPort(ctx, root, ControlPort, time.Second, 5*time.Millisecond)
	if err != nil || dev != filepath.Join(root, "dev/vport0p1") {
		t.Fatalf("FindPort(control) = %q, %v", dev, err)
	}

	_, err = FindPort(ctx, root, "sbx.other", 30*time.Millisecond, 5*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "virtio-serial port sbx.other did not appear within 30ms (ports: vport0p1=sbx.control, vport0p2=sbx.agent)") {
		t.Errorf("missing port: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := FindPort(cctx, root, "sbx.other", time.Minute, 5*time.Millisecond); err != context.Canceled {
		t.Errorf("cancelled wait: %v", err)
	}
}
