package gondolin

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
)

// uuidV5 computes a name-based SHA-1 UUID by hand, per RFC 9562 section
// 5.5, independently of the package under test.
func uuidV5(namespace, name string) string {
	ns, err := hex.DecodeString(strings.ReplaceAll(namespace, "-", ""))
	if err != nil || len(ns) != 16 {
		panic("bad namespace " + namespace)
	}
	h := sha1.New()
	h.Write(ns)
	h.Write([]byte(name))
	b := h.Sum(nil)[:16]
	b[6] = b[6]&0x0f | 0x50 // version 5
	b[8] = b[8]&0x3f | 0x80 // variant 10
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

const namespace = "7b6ed0c0-7e7f-4c2a-8b2d-0bf3d5be9d52"

var (
	sumTest      = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
	sumInitramfs = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	sumRootfs    = "fd61a03af4f77d870fc21e05e7e80678095c92d808cfb3b5c279ee04c74aca13"
)

func TestBuildIDKnownAnswers(t *testing.T) {
	// Computed by running Gondolin's own computeAssetBuildId
	// (host/src/assets.ts at 8a8b762d8ed54a6af61c9579e5161d9133271e80)
	// under node on these inputs.
	cases := []struct {
		c    Checksums
		arch string
		want string
	}{
		{Checksums{Kernel: "a", Initramfs: "b", Rootfs: "c"}, "aarch64", "93a43e1a-bbba-5e28-80c9-796d80452ed9"},
		{Checksums{Kernel: sumTest, Initramfs: sumInitramfs, Rootfs: sumRootfs}, "x86_64", "fc709c8c-4740-5e9f-90ee-1383b89d02d5"},
		{Checksums{Kernel: sumTest, Initramfs: sumInitramfs, Rootfs: sumRootfs, KrunKernel: "k1", KrunInitrd: "i1"}, "aarch64", "85a18cc6-2d28-54c1-bb0f-20df8ae6829e"},
		{Checksums{Kernel: sumTest, Initramfs: sumInitramfs, Rootfs: sumRootfs}, "", "9c9694ff-cd63-582d-9e0b-d65c526e78c4"},
	}
	for _, c := range cases {
		if got := BuildID(c.c, c.arch); got != c.want {
			t.Errorf("BuildID(%+v, %q) = %s, want %s", c.c, c.arch, got, c.want)
		}
	}
}

func TestBuildIDByHand(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 50 {
		var c Checksums
		for _, p := range []*string{&c.Kernel, &c.Initramfs, &c.Rootfs} {
			*p = randHex(r)
		}
		name := "gondolin-asset-build\nkernel=" + c.Kernel + "\ninitramfs=" + c.Initramfs + "\nrootfs=" + c.Rootfs
		if r.IntN(2) == 0 {
			c.KrunKernel = randHex(r)
			name += "\nkrunKernel=" + c.KrunKernel
		}
		if r.IntN(2) == 0 {
			c.KrunInitrd = randHex(r)
			name += "\nkrunInitrd=" + c.KrunInitrd
		}
		arch := []string{"x86_64", "aarch64"}[r.IntN(2)]
		name += "\narch=" + arch
		if got, want := BuildID(c, arch), uuidV5(namespace, name); got != want {
			t.Fatalf("BuildID = %s, by hand %s for %q", got, want, name)
		}
	}
}

func randHex(r *rand.Rand) string {
	var b [32]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// TestBuildIDNode cross-checks with node's crypto, an implementation that
// shares nothing with Go's.
func TestBuildIDNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIPPING NODE CROSS-CHECK: node is not on PATH; install the Debian package nodejs to run it")
	}
	const script = `
const c = require("crypto");
const [ns, name] = [process.argv[1], process.argv[2]];
const h = c.createHash("sha1");
h.update(Buffer.from(ns.replace(/-/g, ""), "hex"));
h.update(Buffer.from(name, "utf8"));
const b = h.digest().subarray(0, 16);
b[6] = (b[6] & 0x0f) | 0x50;
b[8] = (b[8] & 0x3f) | 0x80;
const x = b.toString("hex");
process.stdout.write([x.slice(0, 8), x.slice(8, 12), x.slice(12, 16), x.slice(16, 20), x.slice(20)].join("-"));
`
	c := Checksums{Kernel: sumTest, Initramfs: sumInitramfs, Rootfs: sumRootfs}
	name := fmt.Sprintf("gondolin-asset-build\nkernel=%s\ninitramfs=%s\nrootfs=%s\narch=aarch64", c.Kernel, c.Initramfs, c.Rootfs)
	out, err := exec.Command(node, "-e", script, namespace, name).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	if got := BuildID(c, "aarch64"); got != string(out) {
		t.Errorf("BuildID = %s, node says %s", got, out)
	}
}

func writeAssets(t *testing.T, dir string, extra ...string) {
	t.Helper()
	for _, name := range append([]string{KernelFile, InitramfsFile, RootfsFile}, extra...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("contents of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestManifest(t *testing.T) {
	dir := t.TempDir()
	writeAssets(t, dir)
	when := time.Unix(1700000000, 0)
	cfg := Config{Arch: "amd64", Rootfs: &RootfsConfig{Label: RootfsLabel}, RuntimeDefaults: &RuntimeDefaults{RootfsMode: "cow"}}
	m, err := NewManifest(dir, cfg, when)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}

	// Top-level keys in Gondolin's order.
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		t.Fatalf("manifest does not start with an object: %s", raw)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(keys, ","), "version,buildId,config,buildTime,assets,checksums,runtimeDefaults"; got != want {
		t.Errorf("keys %s, want %s", got, want)
	}

	var doc struct {
		Version int
		BuildID string `json:"buildId"`
		Config  struct {
			Arch, Distro string
			Rootfs       struct{ Label string }
		}
		BuildTime       string `json:"buildTime"`
		Assets          map[string]string
		Checksums       map[string]string
		RuntimeDefaults map[string]string `json:"runtimeDefaults"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	wantAssets := map[string]string{"kernel": "vmlinuz-virt", "initramfs": "initramfs.cpio.lz4", "rootfs": "rootfs.ext4"}
	wantSums := map[string]string{}
	for k, name := range wantAssets {
		wantSums[k] = sumOf("contents of " + name)
	}
	if fmt.Sprint(doc.Assets) != fmt.Sprint(wantAssets) || fmt.Sprint(doc.Checksums) != fmt.Sprint(wantSums) {
		t.Errorf("assets %v checksums %v, want %v %v", doc.Assets, doc.Checksums, wantAssets, wantSums)
	}
	wantID := uuidV5(namespace, "gondolin-asset-build\nkernel="+wantSums["kernel"]+"\ninitramfs="+wantSums["initramfs"]+"\nrootfs="+wantSums["rootfs"]+"\narch=x86_64")
	if doc.Version != 1 || doc.BuildID != wantID || doc.Config.Arch != "x86_64" || doc.Config.Distro != "alpine" ||
		doc.Config.Rootfs.Label != "gondolin-root" || doc.BuildTime != "2023-11-14T22:13:20.000Z" || doc.RuntimeDefaults["rootfsMode"] != "cow" {
		t.Errorf("manifest %+v\nwant buildId %s", doc, wantID)
	}
	if !strings.HasPrefix(string(raw), "{\n  \"version\": 1,\n  \"buildId\": ") {
		t.Errorf("not indented as Gondolin writes it:\n%s", raw)
	}

	if err := Verify(dir); err != nil {
		t.Errorf("Verify: %v", err)
	}
	back, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := back.Marshal(); !bytes.Equal(again, raw) {
		t.Errorf("read and written again differs:\n%s\n%s", again, raw)
	}

	// Same inputs, same manifest.
	m2, err := NewManifest(dir, cfg, when)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := m2.Marshal(); !bytes.Equal(b2, raw) {
		t.Error("manifest is not reproducible")
	}

	// A changed asset fails verification, naming the file.
	if err := os.WriteFile(filepath.Join(dir, RootfsFile), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err == nil || !strings.Contains(err.Error(), RootfsFile) {
		t.Errorf("Verify after changing the rootfs: %v", err)
	}
}

func TestManifestKrun(t *testing.T) {
	dir := t.TempDir()
	writeAssets(t, dir, KrunKernelFile, KrunInitrdFile)
	m, err := NewManifest(dir, Config{Arch: "arm64"}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if m.Assets.KrunKernel != KrunKernelFile || m.Checksums.KrunInitrd != sumOf("contents of "+KrunInitrdFile) {
		t.Errorf("krun assets not picked up: %+v %+v", m.Assets, m.Checksums)
	}
	if m.BuildID != BuildID(m.Checksums, "aarch64") || m.BuildID == BuildID(Checksums{Kernel: m.Checksums.Kernel, Initramfs: m.Checksums.Initramfs, Rootfs: m.Checksums.Rootfs}, "aarch64") {
		t.Error("krun checksums do not take part in the buildId")
	}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err != nil {
		t.Error(err)
	}
}

func TestManifestRefused(t *testing.T) {
	dir := t.TempDir()
	writeAssets(t, dir)
	if _, err := NewManifest(dir, Config{Arch: "riscv64"}, time.Time{}); err == nil {
		t.Error("riscv64 accepted")
	}
	if _, err := NewManifest(dir, Config{Arch: "x86_64", RuntimeDefaults: &RuntimeDefaults{RootfsMode: "rw"}}, time.Time{}); err == nil {
		t.Error("rootfs mode rw accepted")
	}
	if _, err := NewManifest(t.TempDir(), Config{Arch: "x86_64"}, time.Time{}); err == nil || !strings.Contains(err.Error(), KernelFile) {
		t.Errorf("missing kernel: %v", err)
	}
	m, err := NewManifest(dir, Config{Arch: "x86_64"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	bad := m
	bad.BuildID = BuildID(m.Checksums, "aarch64")
	if err := WriteManifest(dir, bad); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched buildId: %v", err)
	}
	bad = m
	bad.Assets.Rootfs = "../rootfs.ext4"
	if err := WriteManifest(dir, bad); err == nil {
		t.Error("asset outside the directory accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); !os.IsNotExist(err) {
		t.Errorf("a refused manifest was written: %v", err)
	}
}

// decodeLegacy parses legacy LZ4 framing independently of the writer and
// checks that every block but the last holds exactly 8 MiB.
func decodeLegacy(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != 0x184C2102 {
		t.Fatalf("no legacy magic: % x", b[:min(4, len(b))])
	}
	var out []byte
	buf := make([]byte, 8<<20)
	last := false
	for p := 4; p < len(b); {
		if last {
			t.Fatalf("a block shorter than 8 MiB is not the last one")
		}
		n := int(binary.LittleEndian.Uint32(b[p:]))
		p += 4
		if n <= 0 || p+n > len(b) {
			t.Fatalf("block size %d at %d", n, p-4)
		}
		m, err := lz4.UncompressBlock(b[p:p+n], buf)
		if err != nil {
			t.Fatalf("block at %d: %v", p-4, err)
		}
		last = m < 8<<20
		out = append(out, buf[:m]...)
		p += n
	}
	return out
}

func TestCompressLegacyLZ4(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	text := []byte(strings.Repeat("initramfs contents compress well; ", 1000))
	mixed := func(n int) []byte {
		b := make([]byte, 0, n)
		for len(b) < n {
			if r.IntN(3) == 0 {
				for range min(4096, n-len(b)) {
					b = append(b, byte(r.Uint32()))
				}
			} else {
				b = append(b, text[:min(len(text), n-len(b))]...)
			}
		}
		return b
	}
	for _, size := range []int{0, 1, 100, 8 << 20, 8<<20 + 1, 20 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			in := mixed(size)
			var a, b bytes.Buffer
			if err := CompressLegacyLZ4(&a, bytes.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			if err := CompressLegacyLZ4(&b, bytes.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("two compressions differ")
			}
			if got := decodeLegacy(t, a.Bytes()); !bytes.Equal(got, in) {
				t.Errorf("own decoding gives %d bytes that differ from the %d in", len(got), len(in))
			}
			// The lz4 module's own reader understands legacy frames.
			got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(a.Bytes())))
			if err != nil || !bytes.Equal(got, in) {
				t.Errorf("lz4.Reader: %d bytes, %v", len(got), err)
			}
			lz4CLI(t, a.Bytes(), in)
		})
	}
}

// lz4CLI decompresses with the reference lz4 tool when it is installed.
func lz4CLI(t *testing.T, compressed, want []byte) {
	t.Helper()
	t.Run("lz4-cli", func(t *testing.T) {
		tool, err := exec.LookPath("lz4")
		if err != nil {
			t.Skip("SKIPPING LZ4 CLI CROSS-CHECK: lz4 is not on PATH; install the Debian package lz4 to run it")
		}
		cmd := exec.Command(tool, "-d", "-c")
		cmd.Stdin = bytes.NewReader(compressed)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("lz4 -d: %v\n%s", err, stderr.Bytes())
		}
		if !bytes.Equal(got, want) {
			t.Errorf("lz4 -d gives %d bytes that differ from the %d in", len(got), len(want))
		}
	})
}
