package machine

import (
	"context"
	"flag"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
	"github.com/sbx-dev/sbx/platform"
)

var update = flag.Bool("update", false, "rewrite testdata/*.argv")

type nopPort struct{}

func (nopPort) Serve(ctx context.Context, conn net.Conn) error { return nil }

// argvCases are full Options, every field the machine hands its
// hypervisor set, and the host they run on.
var argvCases = []struct {
	name string
	opts Options
	host qemu.Host
}{
	{
		name: "full",
		opts: Options{
			Name: "box",
			Boot: BootFiles{
				Name: "img", Kernel: "/images/vmlinuz", Initrd: "/images/initrd.cpio", Disk: "/images/root.qcow2",
				Platform: platform.Platform{OS: "linux", Architecture: "amd64"},
				Cmdline:  []string{"root=/dev/vda", "console=hvc0"},
			},
			CPUs: 2, Memory: 768 << 20, Hostname: "devbox",
			BootTimeout: 90 * time.Second, Mode: bootproto.ModeServe,
			Ports: map[string]Port{"sbx.vfs.b": nopPort{}, "sbx.vfs.a": nopPort{}},
		},
		host: qemu.Host{OS: "linux", Arch: "amd64", Accels: []qemu.Accel{qemu.AccelTCG},
			QEMU: map[string]qemu.Binary{"amd64": {Path: "/usr/bin/qemu-system-x86_64", Version: qemu.Version{Major: 8, Minor: 2, Micro: 2}, Sandbox: true}}},
	},
	{
		name: "bench",
		opts: Options{
			Boot: BootFiles{
				Name: "img", Kernel: "/images/vmlinuz", Initrd: "/images/initrd.cpio", Disk: "/images/root.qcow2",
				Platform: platform.Platform{OS: "linux", Architecture: "arm64"},
			},
			CPUs: 1, Memory: 512 << 20, BootTimeout: time.Minute,
			Bench: Bench{UserNetwork: true, VirtFS: "/src,tree", Legacy: true, TCGBufferMiB: 64},
		},
		host: qemu.Host{OS: "darwin", Arch: "arm64", Accels: []qemu.Accel{qemu.AccelHVF, qemu.AccelTCG},
			QEMU: map[string]qemu.Binary{"arm64": {Path: "/opt/homebrew/bin/qemu-system-aarch64", Version: qemu.Version{Major: 9, Minor: 1}}}},
	},
}

// TestArgvGolden pins QEMU's argument vector for full Options, from
// Options through the machine's description of its VM to QEMU's argv:
// testdata/NAME.argv, one argument per line; -update rewrites them.
func TestArgvGolden(t *testing.T) {
	for _, c := range argvCases {
		t.Run(c.name, func(t *testing.T) {
			name := c.opts.Name
			if name == "" {
				name = c.opts.Boot.Name
			}
			argv, err := qemu.Command(qemu.SpecFor(vmSpec(name, c.opts, "/run/sbx/sbx-1234")), c.host)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(argv, "\n") + "\n"
			file := "testdata/" + c.name + ".argv"
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s", file, diff)
			}
		})
	}
}
