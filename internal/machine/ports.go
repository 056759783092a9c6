package machine

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// maxPorts is how many extra ports a machine may have: what fits on its
// virtio-serial device beside the agent's two.
const maxPorts = 29

// PortSockets names every socket an extra port may have in a machine's
// directory, for cleaning one up.
func PortSockets() []string {
	names := make([]string, maxPorts)
	for i := range names {
		names[i] = portSocket(i)
	}
	return names
}

func portSocket(i int) string { return "port" + strconv.Itoa(i) + ".sock" }

// portSockets names the socket of every virtio-serial port besides the
// agent's, in the machine's directory dir: the control port's, then one
// per extra port, numbered in name order.
func portSockets(dir string, ports map[string]Port) map[string]string {
	socks := map[string]string{bootproto.ControlPort: filepath.Join(dir, CtlSocket)}
	for i, name := range slices.Sorted(maps.Keys(ports)) {
		socks[name] = filepath.Join(dir, portSocket(i))
	}
	return socks
}

// portStopWait bounds how long stopping waits for the ports' Serve to
// return once their connections are closed.
const portStopWait = 5 * time.Second

// servePorts connects to the socket QEMU listens on for each extra port
// and serves it with its Port, each in a goroutine of its own, until
// stopPorts.
func (m *Machine) servePorts(ctx context.Context, socks map[string]string, ports map[string]Port) error {
	if len(ports) == 0 {
		return nil
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	m.portsStop = cancel
	var d net.Dialer
	for _, name := range slices.Sorted(maps.Keys(ports)) {
		conn, err := d.DialContext(ctx, "unix", socks[name])
		if err != nil {
			return fmt.Errorf("port %s: %w", name, err)
		}
		m.ports = append(m.ports, conn)
		m.portsGroup.Add(1)
		go func(p Port) {
			defer m.portsGroup.Done()
			p.Serve(serveCtx, conn)
			conn.Close()
		}(ports[name])
	}
	return nil
}

// stopPorts ends every port's Serve.
func (m *Machine) stopPorts() {
	if m.portsStop == nil {
		return
	}
	m.portsStop()
	for _, c := range m.ports {
		c.Close()
	}
	done := make(chan struct{})
	go func() {
		m.portsGroup.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(portStopWait):
	}
}
