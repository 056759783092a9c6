package agentproto_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/agentproto"
)

func caPEM(t testing.TB, isCA bool) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestConfigureJSON(t *testing.T) {
	in := agentproto.Configure{
		Net:       &agentproto.NetConfig{Interface: "52:54:00:12:34:56", Addr: "10.83.0.2/24", Gateway: "10.83.0.1", DNS: "10.83.0.1", MTU: 1500},
		CACertPEM: caPEM(t, true),
		Env:       []string{"TOKEN=sbx-ph"},
		Hosts:     []string{"10.83.0.9 git.example.test"},
	}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out agentproto.Configure
	if err := agentproto.ParseJSON(agentproto.TypeConfigure, b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip: %+v, want %+v", out, in)
	}
	if !agentproto.TypeConfigure.Known() || agentproto.TypeConfigure.String() != "configure" {
		t.Errorf("TypeConfigure: %v", agentproto.TypeConfigure)
	}
	if mac := in.Net.InterfaceMAC(); mac.String() != "52:54:00:12:34:56" {
		t.Errorf("InterfaceMAC = %v", mac)
	}
	if mac := (&agentproto.NetConfig{Interface: "eth0"}).InterfaceMAC(); mac != nil {
		t.Errorf("InterfaceMAC of a name = %v", mac)
	}
}

func TestParseCACerts(t *testing.T) {
	a, b := caPEM(t, true), caPEM(t, true)
	// Two certificates, with CRLF line ends and blank lines around:
	// the canonical form of each, in order.
	crlf := bytes.ReplaceAll(a, []byte("\n"), []byte("\r\n"))
	got, err := agentproto.ParseCACerts(append(append([]byte("\n\n"), crlf...), append([]byte("\n"), b...)...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(bytes.Clone(a), b...)) {
		t.Errorf("canonical form:\n%s", got)
	}
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "no PEM CERTIFICATE"},
		{"white space", []byte(" \n"), "no PEM CERTIFICATE"},
		{"leaf", caPEM(t, false), "not a CA certificate"},
		{"text between", append(append(bytes.Clone(a), "junk\n"...), b...), "not a PEM CERTIFICATE"},
		{"text after", append(bytes.Clone(a), "junk"...), "not a PEM CERTIFICATE"},
		{"truncated", a[:len(a)-10], "malformed"},
		{"headers", []byte("-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END CERTIFICATE-----\n"), "not a CERTIFICATE"},
		{"huge", bytes.Repeat(a, agentproto.MaxCACertPEM/len(a)+1), "maximum"},
	} {
		if _, err := agentproto.ParseCACerts(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
}

func TestNetConfigValidate(t *testing.T) {
	for _, c := range []struct {
		nc   agentproto.NetConfig
		want string // "" means valid
	}{
		{agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24"}, ""},
		{agentproto.NetConfig{Interface: "enp0s3", Addr: "10.83.0.2/30", Gateway: "10.83.0.1", MTU: 68}, ""},
		{agentproto.NetConfig{Interface: "eth0", Addr: "fd00:83::2/64", Gateway: "fd00:83::1", DNS: "fd00:83::1", MTU: 1280}, ""},
		{agentproto.NetConfig{Interface: "", Addr: "10.83.0.2/24"}, "interface"},
		{agentproto.NetConfig{Interface: "a-very-long-interface", Addr: "10.83.0.2/24"}, "interface"},
		{agentproto.NetConfig{Interface: "eth 0", Addr: "10.83.0.2/24"}, "interface"},
		{agentproto.NetConfig{Interface: "52:54:00:12:34:zz", Addr: "10.83.0.2/24"}, "not a MAC"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/0"}, "not a unicast"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "0.0.0.0/24"}, "not a unicast"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "224.0.0.1/24"}, "not a unicast"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "169.254.1.1/16"}, "not a unicast"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "fe80::1%eth0/64"}, "ADDRESS/PREFIX-LENGTH"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "fd00::1"}, "not another address"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", Gateway: "nope"}, "not an IP address"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "10.83.0.2/24", MTU: 67}, "mtu"},
		{agentproto.NetConfig{Interface: "eth0", Addr: "fd00:83::2/64", MTU: 1279}, "mtu"},
	} {
		err := c.nc.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v; want %q", c.nc, err, c.want)
		}
	}
}

// FuzzConfigure: whatever a configure payload holds, parsing and
// validating it returns, and what passes validation is well-formed
// enough to write into the guest's files: no line breaks anywhere.
func FuzzConfigure(f *testing.F) {
	f.Add([]byte(`{"net":{"interface":"eth0","addr":"10.83.0.2/24","gateway":"10.83.0.1","dns":"10.83.0.1","mtu":1500},"env":["A=1"],"hosts":["10.0.0.1 a.b"]}`))
	f.Add([]byte(`{"ca_cert_pem":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"}`))
	f.Add([]byte(`{"hosts":["10.0.0.1 a\nb"]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		var c agentproto.Configure
		if agentproto.ParseJSON(agentproto.TypeConfigure, p, &c) != nil || c.Validate() != nil {
			return
		}
		for _, s := range c.Hosts {
			if strings.ContainsAny(s, "\r\n") {
				t.Errorf("a valid hosts line with a line break: %q", s)
			}
		}
		if c.Net != nil && strings.ContainsAny(c.Net.DNS+c.Net.Interface, "\r\n ") {
			t.Errorf("a valid net config with a line break or space: %+v", c.Net)
		}
		for _, kv := range c.Env {
			if strings.ContainsRune(kv, 0) || !strings.Contains(kv, "=") {
				t.Errorf("a valid env entry %q", kv)
			}
		}
	})
}

// TestMountValidate: a mount names a port or a tag of the mounts' own,
// never both, and its path is absolute, clean and not the root.
func TestMountValidate(t *testing.T) {
	for _, c := range []struct {
		m  agentproto.Mount
		ok bool
	}{
		{agentproto.Mount{Port: "sbx.vfs.0", Path: "/workspace"}, true},
		{agentproto.Mount{Tag: agentproto.MountTag(3), Path: "/workspace"}, true},
		{agentproto.Mount{Port: "sbx.vfs.0", Tag: "sbx-fs-0", Path: "/workspace"}, false},
		{agentproto.Mount{Path: "/workspace"}, false},
		{agentproto.Mount{Tag: "sbx-fs-", Path: "/workspace"}, false},
		{agentproto.Mount{Tag: "sbx-fs-1x", Path: "/workspace"}, false},
		{agentproto.Mount{Tag: "other", Path: "/workspace"}, false},
		{agentproto.Mount{Port: "sbx.control", Path: "/workspace"}, false},
		{agentproto.Mount{Tag: "sbx-fs-0", Path: "/"}, false},
		{agentproto.Mount{Tag: "sbx-fs-0", Path: "workspace"}, false},
	} {
		if err := c.m.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", c.m, err, c.ok)
		}
	}
	if got := (agentproto.Mount{Tag: "sbx-fs-1"}).Source(); got != "sbx-fs-1" {
		t.Errorf("Source of a tagged mount = %q", got)
	}
}
