package qemu

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/sbx-dev/sbx/platform"
)

var update = flag.Bool("update", false, "rewrite the argv and error sections of testdata/*.txtar")

// TestCommandGolden reads testdata/*.txtar: a host.json (a Host) and a
// spec.json (a VMSpec) in, and either an argv section (one argument per
// line) or an error section out. go test ./internal/machine/qemu -update
// rewrites the outputs.
func TestCommandGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("found %d golden files, want at least 6", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			sections := map[string][]byte{}
			for _, f := range ar.Files {
				sections[f.Name] = f.Data
			}
			var host Host
			var spec VMSpec
			if err := strictJSON(sections["host.json"], &host); err != nil {
				t.Fatalf("%s: host.json: %v", file, err)
			}
			if err := strictJSON(sections["spec.json"], &spec); err != nil {
				t.Fatalf("%s: spec.json: %v", file, err)
			}
			argv, err := Command(spec, host)
			name, got := "argv", ""
			if err != nil {
				name, got = "error", err.Error()+"\n"
			} else {
				got = strings.Join(argv, "\n") + "\n"
			}
			if *update {
				var keep []txtar.File
				for _, f := range ar.Files {
					if f.Name != "argv" && f.Name != "error" {
						keep = append(keep, f)
					}
				}
				ar.Files = append(keep, txtar.File{Name: name, Data: []byte(got)})
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, ok := sections[name]
			if !ok {
				t.Fatalf("%s: Command gave %s:\n%s\nbut the file has no %q section", file, name, got, name)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s: %s differs (-want +got):\n%s", file, name, diff)
			}
		})
	}
}

func strictJSON(data []byte, v any) error {
	if len(data) == 0 {
		return os.ErrNotExist
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func testHost() Host {
	return Host{OS: "linux", Arch: "amd64",
		QEMU: map[string]Binary{
			"amd64": {Path: "/usr/bin/qemu-system-x86_64", Version: Version{7, 2, 22}, Sandbox: true},
		},
		Accels: []Accel{AccelTCG},
	}
}

func testSpec() VMSpec {
	return VMSpec{Name: "eval", Platform: platform.Platform{OS: "linux", Architecture: "amd64"},
		CPUs: 2, MemoryBytes: 1 << 30, Kernel: "/k", QMPSocket: "/run/qmp.sock"}
}

// TestCommandRejects checks each refusal names the problem.
func TestCommandRejects(t *testing.T) {
	long := "/" + strings.Repeat("s", maxUnixPath)
	for _, tc := range []struct {
		name   string
		change func(*VMSpec, *Host)
		want   string
	}{
		{"no name", func(s *VMSpec, h *Host) { s.Name = "" }, "no name"},
		{"windows guest", func(s *VMSpec, h *Host) { s.Platform.OS = "windows" }, "guests must be linux"},
		{"riscv guest", func(s *VMSpec, h *Host) { s.Platform.Architecture = "riscv64" }, "amd64 and arm64 guests only"},
		{"no emulator", func(s *VMSpec, h *Host) { s.Platform.Architecture = "arm64" }, "needs qemu-system-aarch64"},
		{"no cpus", func(s *VMSpec, h *Host) { s.CPUs = 0 }, "cpus is 0"},
		{"odd memory", func(s *VMSpec, h *Host) { s.MemoryBytes = 1<<30 + 1 }, "whole number of MiB"},
		{"no memory", func(s *VMSpec, h *Host) { s.MemoryBytes = 0 }, "whole number of MiB"},
		{"no kernel", func(s *VMSpec, h *Host) { s.Kernel = "" }, "no kernel"},
		{"initrd without kernel", func(s *VMSpec, h *Host) { s.Kernel, s.Paused, s.Initrd = "", true, "/i" }, "without a kernel"},
		{"newline in a parameter", func(s *VMSpec, h *Host) { s.Cmdline = []string{"a=b\nc"} }, "line break"},
		{"no QMP socket", func(s *VMSpec, h *Host) { s.QMPSocket = "" }, "no QMP socket"},
		{"long socket path", func(s *VMSpec, h *Host) { s.AgentSocket = long }, "agent socket " + long},
		{"bad port name", func(s *VMSpec, h *Host) { s.Ports = map[string]string{"a,b": "/p"} }, `port name "a,b"`},
		{"agent port in Ports", func(s *VMSpec, h *Host) { s.Ports = map[string]string{AgentPortName: "/p"} }, "set AgentSocket"},
		{"bad MAC", func(s *VMSpec, h *Host) { s.NetSocket, s.MAC = "/net.sock", "52:54:00:zz:00:01" }, "MAC address"},
		{"multicast MAC", func(s *VMSpec, h *Host) { s.NetSocket, s.MAC = "/net.sock", "01:00:5e:00:00:01" }, "multicast"},
		{"user network and socket", func(s *VMSpec, h *Host) { s.NetSocket, s.UserNetwork = "/net.sock", true }, "both asked for"},
		{"bad MAC, user network", func(s *VMSpec, h *Host) { s.UserNetwork, s.MAC = true, "52:54:00:zz:00:01" }, "MAC address"},
		{"negative translation buffer", func(s *VMSpec, h *Host) { s.TCGBufferMiB = -1 }, "translation buffer of -1 MiB"},
		{"too many file system slots", func(s *VMSpec, h *Host) { s.FSSlots = MaxFSSlots + 1 }, "file system slots; at most"},
		{"negative file system slots", func(s *VMSpec, h *Host) { s.FSSlots = -1 }, "-1 file system slots"},
		{"old QEMU with network", func(s *VMSpec, h *Host) {
			s.NetSocket = "/net.sock"
			b := h.QEMU["amd64"]
			b.Version = Version{7, 1, 0}
			h.QEMU["amd64"] = b
		}, "needs QEMU 7.2 or later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, h := testSpec(), testHost()
			tc.change(&s, &h)
			argv, err := Command(s, h)
			if err == nil {
				t.Fatalf("Command accepted it: %q", argv)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// An old QEMU is fine as long as the guest has no network.
func TestCommandOldQEMUWithoutNetwork(t *testing.T) {
	h := testHost()
	b := h.QEMU["amd64"]
	b.Version = Version{6, 2, 0}
	h.QEMU["amd64"] = b
	if _, err := Command(testSpec(), h); err != nil {
		t.Fatal(err)
	}
}

// Commas in paths are doubled so QEMU reads them as part of the value,
// and no argument ever enables user-mode networking.
func TestCommandEscapesAndNeverUserNet(t *testing.T) {
	s := testSpec()
	s.QMPSocket = "/run/a,b/qmp.sock"
	s.RootDisk = "/d/x,format=raw"
	s.NetSocket = "/n,server=on/net.sock"
	argv, err := Command(s, testHost())
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(argv, " ")
	for _, want := range []string{"path=/run/a,,b/qmp.sock,server=on", "file=/d/x,,format=raw", "addr.path=/n,,server=on/net.sock"} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv lacks %q:\n%s", want, joined)
		}
	}
	for _, bad := range []string{"user,", "-nic user", "hostfwd", "slirp", "-virtfs", "virtio-9p", "fsdev"} {
		if strings.Contains(joined, bad) {
			t.Errorf("argv holds %q:\n%s", bad, joined)
		}
	}
}

func TestCommandIsDeterministic(t *testing.T) {
	s := testSpec()
	s.Ports = map[string]string{"sbx.vfs": "/v.sock", "a": "/a.sock", "z.z": "/z.sock", "m-m": "/m.sock"}
	s.AgentSocket = "/agent.sock"
	first, err := Command(s, testHost())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := Command(s, testHost())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("argv changed between calls:\n%s", diff)
		}
	}
}

func TestDefaultMAC(t *testing.T) {
	a, b := defaultMAC("eval"), defaultMAC("eval2")
	if a == b {
		t.Errorf("two names share MAC %s", a)
	}
	if a != defaultMAC("eval") {
		t.Error("defaultMAC is not stable")
	}
	if !macRE.MatchString(a) {
		t.Errorf("MAC %q is malformed", a)
	}
	first, err := strconv.ParseUint(a[:2], 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	if first&1 != 0 || first&2 == 0 {
		t.Errorf("MAC %s is not a locally administered unicast address", a)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright (c) 2003-2022": {7, 2, 22},
		"QEMU emulator version 9.1.0\n":                        {9, 1, 0},
		"QEMU emulator version 8.2.50 (v8.2.0-1234-gdeadbeef)": {8, 2, 50},
		"QEMU emulator version 10.0\n":                         {10, 0, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseVersion("qemu-system-x86_64: unknown option\n"); err == nil {
		t.Error("ParseVersion accepted output without a version")
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    Version
		want bool
	}{
		{Version{7, 2, 0}, true}, {Version{7, 1, 9}, false}, {Version{8, 0, 0}, true}, {Version{6, 9, 0}, false},
	} {
		if got := tc.v.AtLeast(7, 2); got != tc.want {
			t.Errorf("%v.AtLeast(7, 2) = %v", tc.v, got)
		}
	}
}

func TestHostAccel(t *testing.T) {
	h := Host{Arch: "amd64", Accels: []Accel{AccelKVM, AccelTCG}}
	if a := h.Accel("amd64"); a != AccelKVM {
		t.Errorf("native guest: %s", a)
	}
	if a := h.Accel("arm64"); a != AccelTCG {
		t.Errorf("foreign guest: %s", a)
	}
}

// TestCommandMemoryFile: a machine to be saved maps its RAM file shared,
// one resumed maps the descriptor it is handed private and waits for its
// state; the machine's memory is the backend's.
func TestCommandMemoryFile(t *testing.T) {
	s := testSpec()
	s.Memory = &Memory{Path: "/cache/memory,x", Shared: true}
	argv, err := Command(s, testHost())
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(argv, " ")
	for _, want := range []string{"-object memory-backend-file,id=ram0,size=1024M,share=on,mem-path=/cache/memory,,x", ",memory-backend=ram0 "} {
		if !strings.Contains(line, want) {
			t.Errorf("argv %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "-incoming") {
		t.Errorf("a machine to be saved waits for a state: %q", line)
	}
	s.Memory = &Memory{Path: "saved", File: os.Stdin}
	s.Incoming = true
	argv, err = Command(s, testHost())
	if err != nil {
		t.Fatal(err)
	}
	line = strings.Join(argv, " ")
	for _, want := range []string{"share=off,mem-path=/proc/self/fd/3", "-incoming defer"} {
		if !strings.Contains(line, want) {
			t.Errorf("argv %q lacks %q", line, want)
		}
	}
	s.Memory = &Memory{}
	if _, err := Command(s, testHost()); err == nil {
		t.Error("a memory file with no path or descriptor was accepted")
	}
}
