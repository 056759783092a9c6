package guestcfg_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guest/guestcfg"
	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

// testCA makes a self-signed CA certificate, PEM-encoded, as the host's
// per-user CA is.
func testCA(t testing.TB, name string) []byte { return testCert(t, name, true) }

func testCert(t testing.TB, name string, isCA bool) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  isCA,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// netRecorder stands in for the interface step, which needs a guest (or
// a network namespace: package netcfg's tests).
type netRecorder struct {
	got []agentproto.NetConfig
	err error
}

func (r *netRecorder) apply(_ context.Context, nc agentproto.NetConfig) error {
	r.got = append(r.got, nc)
	return r.err
}

func newState(t *testing.T) (*guestcfg.State, string, *netRecorder) {
	root := t.TempDir()
	rec := &netRecorder{}
	return guestcfg.New(guestcfg.Options{Root: root, Hostname: "box", Net: rec.apply}), root, rec
}

func readFile(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const imageRoots = "-----BEGIN CERTIFICATE-----\nMIIB...an image root...\n-----END CERTIFICATE-----\n"

func TestConfigure(t *testing.T) {
	s, root, rec := newState(t)
	if err := os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, agentproto.CABundlePath), []byte(imageRoots), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := testCA(t, "first")
	nc := &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: "10.83.0.1"}
	req := agentproto.Configure{Net: nc, CACertPEM: ca, Env: []string{"TOKEN=sbx-ph-1"}, Hosts: []string{"10.83.0.9 git.example.test git"}}
	if err := s.Configure(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 || rec.got[0] != *nc {
		t.Errorf("the interface step got %+v", rec.got)
	}
	if got := readFile(t, root, guestcfg.ResolvConfPath); !strings.HasSuffix(got, "\nnameserver 10.83.0.1\noptions timeout:2 attempts:2\n") {
		t.Errorf("resolv.conf:\n%s", got)
	}
	hosts := readFile(t, root, guestcfg.HostsPath)
	for _, want := range []string{"\n127.0.0.1\tlocalhost\n", "\n127.0.1.1\tbox\n", "\n10.83.0.9 git.example.test git\n"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("/etc/hosts has no %q:\n%s", want, hosts)
		}
	}
	if got := readFile(t, root, agentproto.CACertPath); got != string(ca) {
		t.Errorf("ca.crt = %q", got)
	}
	if got := readFile(t, root, guestcfg.LocalCAPath); got != string(ca) {
		t.Errorf("%s = %q", guestcfg.LocalCAPath, got)
	}
	if got := readFile(t, root, agentproto.CABundlePath); got != imageRoots+string(ca) {
		t.Errorf("the bundle is not the image's roots then the CA:\n%s", got)
	}
	for _, p := range []string{agentproto.CACertPath, agentproto.CABundlePath, guestcfg.HostsPath, guestcfg.ResolvConfPath, guestcfg.LocalCAPath} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, %v; want mode 0644", p, fi.Mode(), err)
		}
	}
	want := append(agentproto.CAEnv(), "TOKEN=sbx-ph-1")
	if got := s.Env(); !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}

	// The same again: nothing doubles.
	if err := s.Configure(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, agentproto.CABundlePath); got != imageRoots+string(ca) {
		t.Errorf("after the same configure again, the bundle is:\n%s", got)
	}

	// Another CA replaces the first; the environment is replaced.
	ca2 := testCA(t, "second")
	req2 := agentproto.Configure{CACertPEM: ca2, Env: []string{"OTHER=x"}}
	if err := s.Configure(context.Background(), req2); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, agentproto.CABundlePath); got != imageRoots+string(ca2) {
		t.Errorf("after another CA, the bundle is:\n%s", got)
	}
	if got := readFile(t, root, guestcfg.HostsPath); strings.Contains(got, "git.example.test") {
		t.Errorf("a hosts line the second request dropped stayed:\n%s", got)
	}
	if got := s.Env(); !slices.Equal(got, append(agentproto.CAEnv(), "OTHER=x")) {
		t.Errorf("Env after another configure = %q", got)
	}
	if len(rec.got) != 2 {
		t.Errorf("a request without Net reached the interface step: %+v", rec.got)
	}

	// No CA: taken out, and no CA variables.
	if err := s.Configure(context.Background(), agentproto.Configure{Env: []string{"OTHER=y"}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, agentproto.CABundlePath); got != imageRoots {
		t.Errorf("after a configure without a CA, the bundle is:\n%s", got)
	}
	for _, p := range []string{agentproto.CACertPath, guestcfg.LocalCAPath} {
		if _, err := os.Stat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a configure without a CA: %v", p, err)
		}
	}
	if got := s.Env(); !slices.Equal(got, []string{"OTHER=y"}) {
		t.Errorf("Env without a CA = %q", got)
	}
}

// An image without a bundle gets one holding the CA alone.
func TestConfigureNoBundle(t *testing.T) {
	s, root, _ := newState(t)
	ca := testCA(t, "only")
	if err := s.Configure(context.Background(), agentproto.Configure{CACertPEM: ca}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, agentproto.CABundlePath); got != string(ca) {
		t.Errorf("bundle = %q", got)
	}
	// A bundle without a final newline keeps its last certificate whole.
	if err := os.WriteFile(filepath.Join(root, agentproto.CABundlePath), []byte(strings.TrimSuffix(imageRoots, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Configure(context.Background(), agentproto.Configure{CACertPEM: ca}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, agentproto.CABundlePath); got != imageRoots+string(ca) {
		t.Errorf("bundle = %q", got)
	}
}

// TestConfigureRefusesMalformed: each malformed request is an error and
// changes nothing, neither files nor the exec defaults nor the network.
func TestConfigureRefusesMalformed(t *testing.T) {
	ca := testCA(t, "ok")
	leaf := testCert(t, "leaf", false)
	nc := func(f func(*agentproto.NetConfig)) *agentproto.NetConfig {
		n := &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: "10.83.0.1"}
		f(n)
		return n
	}
	for _, c := range []struct {
		name string
		req  agentproto.Configure
		want string
	}{
		{"hosts line break", agentproto.Configure{Hosts: []string{"10.0.0.1 a\n10.0.0.2 evil"}}, "line break"},
		{"hosts no name", agentproto.Configure{Hosts: []string{"10.0.0.1"}}, "not ADDRESS NAME"},
		{"hosts bad address", agentproto.Configure{Hosts: []string{"host 10.0.0.1"}}, "not an IP address"},
		{"env no equals", agentproto.Configure{Env: []string{"TOKEN"}}, "not KEY=value"},
		{"env bad name", agentproto.Configure{Env: []string{"A B=1"}}, "the name must be"},
		{"env NUL", agentproto.Configure{Env: []string{"A=1\x00B=2"}}, "NUL"},
		{"ca garbage", agentproto.Configure{CACertPEM: []byte("not a certificate")}, "not a PEM CERTIFICATE"},
		{"ca text before", agentproto.Configure{CACertPEM: append([]byte("junk\n"), ca...)}, "not a PEM CERTIFICATE"},
		{"ca private key", agentproto.Configure{CACertPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})}, "not a CERTIFICATE"},
		{"ca not a CA", agentproto.Configure{CACertPEM: leaf}, "not a CA certificate"},
		{"ca bad der", agentproto.Configure{CACertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})}, "certificate 1"},
		{"net no prefix", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.Addr = "10.83.0.2" })}, "ADDRESS/PREFIX-LENGTH"},
		{"net gateway elsewhere", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.Gateway = "192.168.0.1" })}, "not another address"},
		{"net gateway is self", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.Gateway = "10.83.0.2" })}, "not another address"},
		{"net loopback", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.Addr = "127.0.0.2/8"; n.Gateway = "" })}, "not a unicast"},
		{"net bad dns", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.DNS = "10.83.0.1\nnameserver 8.8.8.8" })}, "net dns"},
		{"net interface path", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.Interface = "../x" })}, "neither an interface name"},
		{"net mtu", agentproto.Configure{Net: nc(func(n *agentproto.NetConfig) { n.MTU = 70000 })}, "mtu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, root, rec := newState(t)
			// Everything else in the request is valid: only the one
			// bad field may stop it.
			c.req.Env = append(c.req.Env, "OK=1")
			err := s.Configure(context.Background(), c.req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Configure: %v; want an error saying %q", err, c.want)
			}
			entries, _ := os.ReadDir(root)
			if len(entries) > 0 || len(rec.got) > 0 || len(s.Env()) > 0 {
				t.Errorf("a refused request changed something: files %v, network %v, env %q", entries, rec.got, s.Env())
			}
		})
	}
}

// The interface step's error comes back; the rest is applied.
func TestConfigureNetError(t *testing.T) {
	s, root, rec := newState(t)
	rec.err = errors.New("no interface eth0")
	err := s.Configure(context.Background(), agentproto.Configure{Net: &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", DNS: "10.83.0.1"}, Env: []string{"A=1"}})
	if err == nil || !strings.Contains(err.Error(), "no interface eth0") {
		t.Fatalf("Configure: %v", err)
	}
	if got := readFile(t, root, guestcfg.ResolvConfPath); !strings.Contains(got, "nameserver 10.83.0.1") {
		t.Errorf("resolv.conf = %q", got)
	}
	if got := s.Env(); !slices.Equal(got, []string{"A=1"}) {
		t.Errorf("Env = %q", got)
	}
}

// TestCASurvivesBundleRebuild: Debian's update-ca-certificates, which a
// package install in the sandbox may run, rebuilds the bundle from the
// image's roots and the local CAs; the sandbox CA stays in it, once, and
// a later Configure still finds and replaces it.
func TestCASurvivesBundleRebuild(t *testing.T) {
	tool, err := exec.LookPath("update-ca-certificates")
	if err != nil {
		t.Fatal("update-ca-certificates is not on PATH; install the Debian package ca-certificates to run this test")
	}
	s, root, _ := newState(t)
	img := testCA(t, "image root")
	if err := os.MkdirAll(filepath.Join(root, "usr/share/ca-certificates/img"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/share/ca-certificates/img/root.crt"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/ca-certificates.conf"), []byte("img/root.crt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rebuild := func() {
		t.Helper()
		cmd := exec.Command(tool, "--sysroot", root, "--fresh")
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("update-ca-certificates: %v\n%s", err, out)
		}
	}
	count := func(cert []byte) int {
		t.Helper()
		return strings.Count(readFile(t, root, agentproto.CABundlePath), string(cert))
	}
	rebuild()
	if count(img) != 1 {
		t.Fatalf("the image's bundle does not hold its root once:\n%s", readFile(t, root, agentproto.CABundlePath))
	}

	ca := testCA(t, "sandbox")
	if err := s.Configure(context.Background(), agentproto.Configure{CACertPEM: ca}); err != nil {
		t.Fatal(err)
	}
	rebuild()
	if count(img) != 1 || count(ca) != 1 {
		t.Errorf("after a rebuild: image root %d times, sandbox CA %d times; want once each", count(img), count(ca))
	}
	if err := s.Configure(context.Background(), agentproto.Configure{CACertPEM: ca}); err != nil {
		t.Fatal(err)
	}
	if count(img) != 1 || count(ca) != 1 {
		t.Errorf("configured again after a rebuild: image root %d times, sandbox CA %d times; want once each", count(img), count(ca))
	}
	ca2 := testCA(t, "sandbox, rotated")
	if err := s.Configure(context.Background(), agentproto.Configure{CACertPEM: ca2}); err != nil {
		t.Fatal(err)
	}
	rebuild()
	if count(img) != 1 || count(ca) != 0 || count(ca2) != 1 {
		t.Errorf("after another CA and a rebuild: image root %d, old CA %d, new CA %d times; want 1, 0, 1", count(img), count(ca), count(ca2))
	}
}

// TestConfigureMounts: each mount is made once, a later request naming
// it again from the same port leaves it, one naming another port for the
// same path is refused, and malformed mounts are refused before anything
// is mounted.
func TestConfigureMounts(t *testing.T) {
	var made []agentproto.Mount
	s := guestcfg.New(guestcfg.Options{Root: t.TempDir(), Hostname: "box",
		Net:   func(context.Context, agentproto.NetConfig) error { return nil },
		Mount: func(m agentproto.Mount) error { made = append(made, m); return nil }})
	ctx := context.Background()
	ws := agentproto.Mount{Port: "sbx.vfs.0", Path: "/workspace"}
	ro := agentproto.Mount{Port: "sbx.vfs.1", Path: "/data", ReadOnly: true}
	if err := s.Configure(ctx, agentproto.Configure{Mounts: []agentproto.Mount{ws, ro}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Configure(ctx, agentproto.Configure{Mounts: []agentproto.Mount{ws}}); err != nil {
		t.Fatal(err)
	}
	if len(made) != 2 || made[0] != ws || made[1] != ro {
		t.Errorf("mounted %+v; want each once", made)
	}
	if err := s.Configure(ctx, agentproto.Configure{Mounts: []agentproto.Mount{{Port: "sbx.vfs.2", Path: "/workspace"}}}); err == nil {
		t.Error("a second port for /workspace was accepted")
	}
	for _, bad := range []agentproto.Mount{
		{Port: "sbx.agent", Path: "/x"}, {Port: "sbx.vfs.", Path: "/x"}, {Port: "sbx.vfs.0", Path: "/"},
		{Port: "sbx.vfs.0", Path: "rel"}, {Port: "sbx.vfs.0", Path: "/a/../b"}, {Port: "sbx.vfs.0", Path: "/a\x00b"},
	} {
		if err := s.Configure(ctx, agentproto.Configure{Mounts: []agentproto.Mount{bad}}); err == nil {
			t.Errorf("mount %+v was accepted", bad)
		}
	}
	if err := s.Configure(ctx, agentproto.Configure{Mounts: []agentproto.Mount{{Port: "sbx.vfs.3", Path: "/x"}, {Port: "sbx.vfs.4", Path: "/x"}}}); err == nil {
		t.Error("two mounts at /x were accepted")
	}
	if len(made) != 2 {
		t.Errorf("refused requests mounted %+v", made[2:])
	}
}

// Each step that can wait outside the guest is announced as it begins,
// in order, so that the last one announced is where an unfinished
// request waits.
func TestConfigureAnnouncesSteps(t *testing.T) {
	var steps []string
	s := guestcfg.New(guestcfg.Options{Root: t.TempDir(), Hostname: "box",
		Net:   func(context.Context, agentproto.NetConfig) error { return nil },
		Mount: func(m agentproto.Mount) error { return nil },
		Step:  func(step string) { steps = append(steps, step) }})
	req := agentproto.Configure{
		Net:    &agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: "10.83.0.1"},
		Mounts: []agentproto.Mount{{Port: "sbx.vfs.0", Path: "/workspace"}},
	}
	if err := s.Configure(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	want := []string{"network", "mount /workspace from sbx.vfs.0"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %q, want %q", steps, want)
	}
}
