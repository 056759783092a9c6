package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/bootproto"
)

// findPort returns the device of the virtio-serial port the host named
// name, such as /dev/vport0p1, looking under root's bootproto.PortsDir
// until it appears or timeout passes. The kernel creates a port's sysfs
// directory when the device appears and fills in its name when the host
// sends it, a moment later, so both are waited for.
func findPort(ctx context.Context, root, name string, timeout, poll time.Duration) (string, error) {
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	dir := filepath.Join(root, bootproto.PortsDir)
	for {
		ports, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("virtio-serial port %s: %w", name, err)
		}
		var seen []string
		for _, p := range ports {
			b, err := os.ReadFile(filepath.Join(dir, p.Name(), "name"))
			if err != nil {
				continue
			}
			got := strings.TrimSpace(string(b))
			if got == name {
				dev := filepath.Join(root, "dev", p.Name())
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
			seen = append(seen, p.Name()+"="+got)
		}
		if time.Now().After(deadline) {
			slices.Sort(seen)
			have := "none"
			if len(seen) > 0 {
				have = strings.Join(seen, ", ")
			}
			return "", fmt.Errorf("virtio-serial port %s did not appear within %v (ports: %s); the virtio_console module and the host's virtserialport device are needed", name, timeout, have)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(poll):
		}
	}
}
