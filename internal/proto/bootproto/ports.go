package bootproto

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The virtio-serial ports a serving guest (ModeServe) has. The host names
// them when it starts the machine ("-device virtserialport,name=..."),
// and the agent finds each by its name under PortsDir, so neither side
// depends on the order the ports are numbered in.
const (
	// AgentPort carries the agent protocol (package internal/proto/agentproto):
	// the host's exec and file requests and their data.
	AgentPort = "sbx.agent"
	// ControlPort carries control lines (ControlLine) from the host to
	// the agent. It is a port of its own so that a request to power off
	// reaches the agent whatever state the agent protocol is in.
	ControlPort = "sbx.control"
)

// PortsDir is where the kernel lists virtio-serial ports, relative to the
// guest's root: one directory per port (vport0p1, ...), each holding the
// port's name in the file "name". The port's device is /dev/ plus the
// directory's name.
const PortsDir = "sys/class/virtio-ports"

// Control requests the host writes on ControlPort, one per line.
const (
	// ControlPowerOff asks the agent to end every process, flush and
	// detach the root disk and power the machine off.
	ControlPowerOff = "poweroff"
)

// ControlLine renders a control request as the line the host writes.
func ControlLine(request string) string {
	return request + "\n"
}

// ParseControl reads one control line (without its newline) and returns
// the request it holds. Blank lines hold none: request "" and no error.
func ParseControl(line string) (request string, err error) {
	line = strings.TrimSpace(line)
	switch line {
	case "", ControlPowerOff:
		return line, nil
	}
	return "", fmt.Errorf("unknown control request %q (known: %s)", line, ControlPowerOff)
}

// FindPort returns the device of the virtio-serial port the host named
// name, such as /dev/vport0p1, looking under root's bootproto.PortsDir
// until it appears or timeout passes. The kernel creates a port's sysfs
// directory when the device appears and fills in its name when the host
// sends it, a moment later, so both are waited for.
func FindPort(ctx context.Context, root, name string, timeout, poll time.Duration) (string, error) {
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	dir := filepath.Join(root, PortsDir)
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
