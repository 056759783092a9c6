package bootproto

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplitCmdline(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  console=ttyS0   quiet\n", []string{"console=ttyS0", "quiet"}},
		{`a="b c" d`, []string{"a=b c", "d"}},
		{`"a=b c" d`, []string{"a=b c", "d"}},
		{`a="" b`, []string{"a=", "b"}},
		{"a b -- c d", []string{"a", "b"}},
		{"a --", []string{"a"}},
		{"a --x", []string{"a", "--x"}},
		{"\ta\tb\r\n", []string{"a", "b"}},
	} {
		if got := SplitCmdline(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitCmdline(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseCmdline(t *testing.T) {
	got, err := ParseCmdline("BOOT_IMAGE=/vmlinuz console=ttyS0 sbx.root=/dev/vdb sbx.rootwait=5s sbx.boottimeout=1m " +
		`sbx.hostname=box-1 sbx.rootfstype=ext4 sbx.mode=ready-poweroff root=/dev/sda -- sbx.mode=bogus` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Mode: ModeReadyPowerOff, Root: "/dev/vdb", RootFSType: "ext4", RootWait: 5 * time.Second, BootTimeout: time.Minute, Hostname: "box-1"}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got, err := ParseCmdline("console=ttyS0 quiet"); err != nil || got != DefaultConfig() {
		t.Errorf("empty: %+v, %v; want the defaults", got, err)
	}
	if got, _ := ParseCmdline("sbx.rootwait=1s sbx.rootwait=2s"); got.RootWait != 2*time.Second {
		t.Errorf("the later parameter did not win: %v", got.RootWait)
	}

	for _, c := range []struct{ in, want string }{
		{"sbx.mode=shell", `kernel parameter sbx.mode: unknown mode "shell" (known: ready-poweroff, serve)`},
		{"sbx.mode", "kernel parameter sbx.mode has no value"},
		{"sbx.root=vda", `kernel parameter sbx.root: "vda" is not a device path under /dev/`},
		{"sbx.root=/dev/../etc/passwd", "not a device path"},
		{"sbx.root=/dev/", "not a device path"},
		{"sbx.rootfstype=", "is not a file system type"},
		{"sbx.rootwait=5", `kernel parameter sbx.rootwait: "5" is not a duration such as 30s`},
		{"sbx.boottimeout=-1s", `kernel parameter sbx.boottimeout: "-1s" must be positive`},
		{"sbx.hostname=-x", "must not start or end"},
		{"sbx.hostnme=x", "kernel parameter sbx.hostnme: unknown parameter (known: sbx.boottimeout, sbx.hostname, sbx.mode, sbx.root, sbx.rootfstype, sbx.rootwait)"},
	} {
		_, err := ParseCmdline("console=ttyS0 " + c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCmdline(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

func TestParamsRoundTrip(t *testing.T) {
	if p := DefaultConfig().Params(); len(p) != 0 {
		t.Errorf("default config renders %q, want nothing", p)
	}
	for _, c := range []Config{
		{Mode: ModeReadyPowerOff, Root: "/dev/vdb", RootFSType: "ext2", RootWait: 1500 * time.Millisecond, BootTimeout: time.Hour, Hostname: "a.b-c"},
		func() Config { c := DefaultConfig(); c.Hostname = "x"; return c }(),
		func() Config { c := DefaultConfig(); c.RootWait = 3 * time.Second; return c }(),
	} {
		params := c.Params()
		got, err := ParseCmdline("console=ttyS0 " + strings.Join(params, " "))
		if err != nil || got != c {
			t.Errorf("%+v renders %q, which parses as %+v (%v)", c, params, got, err)
		}
	}
	c := DefaultConfig()
	c.RootWait = 3 * time.Second
	if got := strings.Join(c.Params(), " "); got != "sbx.rootwait=3s" {
		t.Errorf("Params = %q, want only the non-default sbx.rootwait=3s", got)
	}
}

func TestCheckHostname(t *testing.T) {
	for _, ok := range []string{"a", "sbx", "eval-1.example", strings.Repeat("a", 64)} {
		if err := CheckHostname(ok); err != nil {
			t.Errorf("CheckHostname(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("a", 65), "a b", "a_b", "-a", "a.", "é"} {
		if err := CheckHostname(bad); err == nil {
			t.Errorf("CheckHostname(%q) accepted", bad)
		}
	}
}

func TestReadyLine(t *testing.T) {
	r := Ready{Kernel: "6.1.0-57-amd64", Hostname: "box", Mode: ModeReadyPowerOff, Root: "/dev/vda", Modules: 23, UptimeMillis: 3750, AgentMillis: 1264}
	line := r.Line()
	want := `sbx-guest: ready {"kernel":"6.1.0-57-amd64","hostname":"box","mode":"ready-poweroff","root":"/dev/vda","modules":23,"uptime_ms":3750,"agent_ms":1264}` + "\n"
	if line != want {
		t.Errorf("Line() = %q\nwant %q", line, want)
	}
	// Kernel messages around it and a serial line's \r\n.
	console := "[    1.0] virtio_blk virtio1: [vda] 131072 512-byte logical blocks\r\n[    2.0] random: crng init done" +
		strings.ReplaceAll(line, "\n", "\r\n") + "[    3.8] reboot: Power down\r\n"
	got, ok, err := ParseReady([]byte(console))
	if err != nil || !ok || got != r {
		t.Errorf("ParseReady = %+v, %v, %v; want %+v", got, ok, err, r)
	}
	if _, ok, err := ParseReady([]byte("[ 1.0] nothing here\n")); ok || err != nil {
		t.Errorf("no ready line: ok %v err %v", ok, err)
	}
	for _, bad := range []string{ReadyPrefix + "{\"kernel\":", ReadyPrefix + `{"kernel":"x","extra":1}`, ReadyPrefix + "\n{}"} {
		if _, ok, err := ParseReady([]byte(bad)); !ok || err == nil {
			t.Errorf("ParseReady(%q): ok %v err %v; want ok and an error", bad, ok, err)
		}
	}
}

func TestErrorLine(t *testing.T) {
	line := ErrorLine(errors.New("root disk /dev/vda did not appear\nwithin 3s"))
	if line != "sbx-guest: error: root disk /dev/vda did not appear / within 3s\n" {
		t.Errorf("ErrorLine = %q", line)
	}
	msg, ok := ParseError([]byte("boot\r\n" + strings.ReplaceAll(line, "\n", "\r\n") + "[ 6.2] reboot: Power down\r\n"))
	if !ok || msg != "root disk /dev/vda did not appear / within 3s" {
		t.Errorf("ParseError = %q, %v", msg, ok)
	}
	if _, ok := ParseError([]byte(WarningLine("module x: no such device"))); ok {
		t.Error("a warning parsed as an error")
	}
}

func TestModuleList(t *testing.T) {
	mods := []ModuleEntry{
		{Name: "virtio_pci", File: "lib/modules/6.1.0-57-amd64/kernel/drivers/virtio/virtio_pci.ko"},
		{Name: "virtio_blk", File: "lib/modules/6.1.0-57-amd64/kernel/drivers/block/virtio_blk.ko"},
	}
	var buf bytes.Buffer
	if err := WriteModuleList(&buf, mods); err != nil {
		t.Fatal(err)
	}
	want := moduleListHeader +
		"virtio_pci lib/modules/6.1.0-57-amd64/kernel/drivers/virtio/virtio_pci.ko\n" +
		"virtio_blk lib/modules/6.1.0-57-amd64/kernel/drivers/block/virtio_blk.ko\n"
	if buf.String() != want {
		t.Errorf("manifest:\n%s\nwant:\n%s", buf.String(), want)
	}
	got, err := ParseModuleList(strings.NewReader(buf.String()+"\n# trailing comment\n"), "modules.list")
	if err != nil || !reflect.DeepEqual(got, mods) {
		t.Errorf("ParseModuleList = %+v, %v", got, err)
	}

	for _, c := range []struct{ in, want string }{
		{"# x\nvirtio_blk\n", "modules.list:2: want NAME PATH"},
		{"a b c\n", "modules.list:1: want NAME PATH"},
		{"a /lib/modules/a.ko\n", "modules.list:1: module a: file \"/lib/modules/a.ko\" must be a clean relative path"},
		{"a ../a.ko\n", "must be a clean relative path"},
		{"a lib//a.ko\n", "must be a clean relative path"},
		{"a/b lib/a.ko\n", "has a space or slash"},
	} {
		if _, err := ParseModuleList(strings.NewReader(c.in), "modules.list"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseModuleList(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
	if err := WriteModuleList(&buf, []ModuleEntry{{Name: "a", File: "a b.ko"}}); err == nil {
		t.Error("WriteModuleList accepted a path with a space")
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add(`console=ttyS0 sbx.hostname="a b" sbx.rootwait=3s -- x`)
	f.Add(`"sbx.mode=ready-poweroff`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCmdline(s)
		if err != nil {
			return
		}
		// What parses renders back to the same configuration.
		back, err := ParseCmdline(strings.Join(c.Params(), " "))
		if err != nil || back != c {
			t.Errorf("%q parses as %+v, which renders as %q and parses back as %+v (%v)", s, c, c.Params(), back, err)
		}
	})
}

func TestControl(t *testing.T) {
	for _, c := range []struct{ line, want, err string }{
		{"poweroff", ControlPowerOff, ""},
		{" poweroff\r", ControlPowerOff, ""},
		{"", "", ""},
		{"reboot", "", `unknown control request "reboot" (known: poweroff)`},
	} {
		got, err := ParseControl(c.line)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("ParseControl(%q) = %q, %v; want %q, %q", c.line, got, err, c.want, c.err)
		}
	}
	if line := ControlLine(ControlPowerOff); line != "poweroff\n" {
		t.Errorf("ControlLine = %q", line)
	}
	if req, err := ParseControl(strings.TrimSuffix(ControlLine(ControlPowerOff), "\n")); req != ControlPowerOff || err != nil {
		t.Errorf("a rendered control line does not parse back: %q, %v", req, err)
	}
}

func TestLastStep(t *testing.T) {
	console := "[ 1.0] boot\r\n" + StepLine("network") + StepLine("mount /workspace\nfrom sbx.vfs.0") + "[ 2.0] 9pnet: something\r\n"
	step, ok := LastStep([]byte(console))
	if !ok || step != "mount /workspace / from sbx.vfs.0" {
		t.Errorf("LastStep = %q, %v", step, ok)
	}
	if _, ok := LastStep([]byte("sbx-guest: ready {}\n")); ok {
		t.Error("LastStep found a step in a console without one")
	}
}
