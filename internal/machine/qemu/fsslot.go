//go:build unix

package qemu

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
)

// MaxFSSlots is the most VMSpec.FSSlots: root ports take bus numbers
// and I/O windows, and a sandbox serves few mounts.
const MaxFSSlots = 8

// MaxFSTag is the longest tag a file system device takes (the virtio-fs
// configuration's tag field).
const MaxFSTag = 36

var fsTagRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// fsSlotID is the device id of root port i.
func fsSlotID(i int) string { return "fsport" + strconv.Itoa(i) }

// AddFS plugs a vhost-user file system device ("vhost-user-fs-pci")
// into root port slot of a machine started with VMSpec.FSSlots, its
// vhost-user backend at the other end of the connected unix socket
// sock, and names it tag for the guest, which mounts it by that tag
// ("mount -t virtiofs tag dir"). The machine's RAM must be a shared
// file (VMSpec.Memory with Shared): the backend reads and writes the
// guest's buffers in it. QEMU speaks to the backend while the device is
// added, so the backend must be serving sock already. AddFS returns
// once QEMU has added the device; the guest's kernel finds it soon
// after, on its own. ctx bounds the exchange.
func (p *Process) AddFS(ctx context.Context, slot int, tag string, sock *os.File) error {
	if slot < 0 || slot >= p.fsSlots {
		return fmt.Errorf("file system slot %d: the machine has %d", slot, p.fsSlots)
	}
	if len(tag) > MaxFSTag || !fsTagRE.MatchString(tag) {
		return fmt.Errorf("file system tag %q: use letters, digits, '.', '_' and '-', %d at most", tag, MaxFSTag)
	}
	if !p.sharedRAM {
		return fmt.Errorf("file system %s: the machine's RAM is not shared memory, which a vhost-user backend needs", tag)
	}
	id := "fs" + strconv.Itoa(slot)
	fdname := "sbx-" + id
	if err := p.QMP.ExecuteWithFile(ctx, "getfd", map[string]any{"fdname": fdname}, nil, sock); err != nil {
		return fmt.Errorf("file system %s: %w", tag, err)
	}
	chardev := map[string]any{
		"id": id,
		"backend": map[string]any{"type": "socket", "data": map[string]any{
			"addr":   map[string]any{"type": "fd", "data": map[string]any{"str": fdname}},
			"server": false,
		}},
	}
	if err := p.QMP.Execute(ctx, "chardev-add", chardev, nil); err != nil {
		return fmt.Errorf("file system %s: connecting its backend: %w", tag, err)
	}
	dev := map[string]any{"driver": "vhost-user-fs-pci", "id": "v" + id, "chardev": id, "tag": tag, "bus": fsSlotID(slot)}
	if err := p.QMP.Execute(ctx, "device_add", dev, nil); err != nil {
		p.QMP.Execute(context.WithoutCancel(ctx), "chardev-remove", map[string]any{"id": id}, nil)
		return fmt.Errorf("file system %s: adding its device: %w", tag, err)
	}
	return nil
}
