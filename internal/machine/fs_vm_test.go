package machine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
	"github.com/sbx-dev/sbx/internal/virtio/vhostuser"
	"github.com/sbx-dev/sbx/internal/virtio/virtq"
)

// FUSE's wire numbers the test device needs (Linux's uapi fuse.h).
const (
	fuseInit      = 26
	fuseInHeader  = 40
	fuseOutHeader = 16
	fuseInitOut   = 64
	enosys        = 38
)

// initDevice answers FUSE_INIT as a file server would and every other
// request with ENOSYS, recording the opcodes the guest's kernel sent:
// enough to see requests and replies cross guest memory both ways.
type initDevice struct {
	mu   sync.Mutex
	ops  []uint32
	bad  []string
	init chan struct{}
}

func (d *initDevice) Handle(q int, c *virtq.Chain) uint32 {
	var in []byte
	for _, b := range c.Readable {
		in = append(in, b...)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(in) < fuseInHeader || int(binary.LittleEndian.Uint32(in)) != len(in) {
		d.bad = append(d.bad, "a request whose length field is not its size")
		return 0
	}
	op := binary.LittleEndian.Uint32(in[4:])
	unique := binary.LittleEndian.Uint64(in[8:])
	d.ops = append(d.ops, op)
	out := make([]byte, fuseOutHeader)
	binary.LittleEndian.PutUint64(out[8:], unique)
	if op == fuseInit {
		body := make([]byte, fuseInitOut)
		binary.LittleEndian.PutUint32(body[0:], 7)        // major
		binary.LittleEndian.PutUint32(body[4:], 31)       // minor
		binary.LittleEndian.PutUint32(body[8:], 128<<10)  // max_readahead
		binary.LittleEndian.PutUint32(body[20:], 128<<10) // max_write
		binary.LittleEndian.PutUint32(body[24:], 1)       // time_gran
		binary.LittleEndian.PutUint16(body[28:], 32)      // max_pages
		out = append(out, body...)
		select {
		case <-d.init:
		default:
			close(d.init)
		}
	} else {
		errno := int32(-enosys)
		binary.LittleEndian.PutUint32(out[4:], uint32(errno))
	}
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	var n uint32
	for _, w := range c.Writable {
		k := copy(w, out)
		out = out[k:]
		n += uint32(k)
	}
	if len(out) > 0 {
		d.bad = append(d.bad, "a reply that did not fit the request's buffers")
	}
	return n
}

// TestAddFS: a file system device plugged into a running machine's slot
// is found by the guest's kernel, which mounts it by its tag and speaks
// FUSE to a backend in this process through the guest's shared memory:
// the INIT request arrives and its answer completes the mount, and a
// later request's error reaches the guest's program.
func TestAddFS(t *testing.T) {
	_, cfg, img := machinetest.Require(t)
	sb := cfg.Sandboxes[machinetest.Sandbox]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m, err := machine.Start(ctx, machine.Options{Name: "fs", Boot: bootFiles(t, img), CPUs: sb.CPUs, Memory: sb.Memory, FSSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "backend"), os.NewFile(uintptr(fds[1]), "qemu")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev := &initDevice{init: make(chan struct{})}
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { served <- vhostuser.Serve(sctx, c.(*net.UnixConn), dev, vhostuser.Options{Queues: 2}) }()
	err = m.AddFS(ctx, 0, "sbx-fs-0", theirs)
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddFS(ctx, 1, "sbx-fs-1", theirs); err == nil || !strings.Contains(err.Error(), "slot 1") {
		t.Errorf("a second device in a machine of one slot: %v", err)
	}

	var stdout, stderr bytes.Buffer
	script := `mkdir -p /mnt; i=0
until mount -t virtiofs sbx-fs-0 /mnt 2>/tmp/err; do
	i=$((i+1)); [ $i -lt 300 ] || { cat /tmp/err >&2; exit 9; }; sleep 0.1
done
stat /mnt/x; echo "stat $?"`
	st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"sh", "-c", script}, User: "root", Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 0 {
		t.Fatalf("mounting the device: %v, stderr %q", st, stderr.String())
	}
	select {
	case <-dev.init:
	default:
		t.Fatal("the backend never saw FUSE_INIT")
	}
	if !strings.Contains(stdout.String(), "stat 1") || !strings.Contains(stderr.String(), "not implemented") {
		t.Errorf("stat of a name the backend answers ENOSYS for: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	dev.mu.Lock()
	t.Logf("opcodes from the guest: %v", dev.ops)
	if len(dev.bad) > 0 {
		t.Errorf("malformed exchanges: %v", dev.bad)
	}
	dev.mu.Unlock()
}
