package machine_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// upper is a Port that sends back what it reads, in upper case.
type upper struct{ served chan struct{} }

func (u upper) Serve(ctx context.Context, conn net.Conn) error {
	close(u.served)
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return err
		}
		if _, err := conn.Write(bytes.ToUpper(buf[:n])); err != nil {
			return err
		}
	}
}

// TestPorts: an extra port reaches its Port on the host from the device
// the guest finds under its name, both ways; a bad name is refused
// before anything starts.
func TestPorts(t *testing.T) {
	t.Parallel()
	u := upper{served: make(chan struct{})}
	m := start(t, machine.Options{Ports: map[string]machine.Port{"sbx.test-upper": u}})
	select {
	case <-u.served:
	default:
		t.Fatal("the port's Serve did not start with the machine")
	}
	script := `for d in /sys/class/virtio-ports/*; do [ "$(cat $d/name)" = sbx.test-upper ] && dev=/dev/${d##*/}; done
exec 3<>$dev; echo hello >&3; head -c 6 <&3`
	if out := run(t, m, "root", 0, "sh", "-c", script); out != "HELLO\n" {
		t.Errorf("the guest read %q back from its port, want %q", out, "HELLO\n")
	}

	_, _, img := machinetest.Require(t)
	for _, bad := range []string{"sbx.agent", "other", "sbx.UPPER", "sbx."} {
		_, err := machine.Start(context.Background(), machine.Options{Boot: bootFiles(t, img), Ports: map[string]machine.Port{bad: u}})
		if err == nil || !strings.Contains(err.Error(), "port") {
			t.Errorf("port name %q: %v; want it refused", bad, err)
		}
	}
}
