package ca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestLoadOrCreateModesAndReload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "sbx", "ca")
	a, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{
		dir:                          fs.ModeDir | 0o700,
		filepath.Join(dir, KeyFile):  0o600,
		filepath.Join(dir, CertFile): 0o644,
	} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	keyPEM, _ := os.ReadFile(filepath.Join(dir, KeyFile))
	if bytes.Contains(a.CertPEM(), keyPEM) || bytes.Contains(a.CertPEM(), []byte("PRIVATE")) {
		t.Error("CertPEM carries the key")
	}
	c := a.Certificate()
	if !c.IsCA || !c.MaxPathLenZero || c.NotAfter.Sub(c.NotBefore) < 9*365*24*time.Hour {
		t.Errorf("CA certificate: IsCA %v MaxPathLenZero %v validity %v", c.IsCA, c.MaxPathLenZero, c.NotAfter.Sub(c.NotBefore))
	}
	if want := caName(); c.Subject.CommonName != want {
		t.Errorf("name %q, want %q", c.Subject.CommonName, want)
	}

	b, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Fatal("reload made another CA")
	}
	// A leaf of the reloaded CA verifies against the first one's pool.
	leaf, err := b.Leaf("example.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: a.Pool(), DNSName: "example.test"}); err != nil {
		t.Fatal(err)
	}
}

func wantUnsafe(t *testing.T, err error, path string) {
	t.Helper()
	var ue *UnsafeError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want *UnsafeError", err)
	}
	if ue.Path != path {
		t.Fatalf("UnsafeError names %s, want %s", ue.Path, path)
	}
}

func TestRefusesKeyReadableByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, KeyFile)
	for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadOrCreate(dir)
		wantUnsafe(t, err, key)
	}
}

func TestRefusesDirWritableByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreate(dir)
	wantUnsafe(t, err, dir)
}

func TestRefusesSymlinkedDir(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	if _, err := LoadOrCreate(real); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreate(link)
	wantUnsafe(t, err, link)
}

func TestRefusesSymlinkedFiles(t *testing.T) {
	for _, name := range []string{KeyFile, CertFile} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			other := filepath.Join(tmp, "other")
			if _, err := LoadOrCreate(other); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(tmp, "ca")
			if _, err := LoadOrCreate(dir); err != nil {
				t.Fatal(err)
			}
			// Someone swaps the file for a link to a CA they control.
			path := filepath.Join(dir, name)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(other, name), path); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOrCreate(dir)
			wantUnsafe(t, err, path)
		})
	}
}

func TestRefusesOtherUsersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file owned by another user")
	}
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, KeyFile)
	if err := os.Lchown(key, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreate(dir)
	wantUnsafe(t, err, key)
	if err := os.Lchown(key, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(dir, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	_, err = LoadOrCreate(dir)
	wantUnsafe(t, err, dir)
}

func TestConcurrentFirstRunsAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	const n = 8
	pems := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := LoadOrCreate(dir)
			errs[i] = err
			if err == nil {
				pems[i] = a.CertPEM()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(pems[i], pems[0]) {
			t.Fatalf("run %d made another CA", i)
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil || !bytes.Equal(onDisk, pems[0]) {
		t.Fatalf("certificate on disk differs from the one returned (%v)", err)
	}
}

func TestLeafVerifiesOnlyForItsName(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := a.Leaf("API.Example.test.")
	if err != nil {
		t.Fatal(err)
	}
	pool := a.Pool()
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.test"}); err != nil {
		t.Fatalf("leaf does not verify for its name: %v", err)
	}
	for _, other := range []string{"example.test", "x.api.example.test", "evil.test"} {
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: other}); err == nil {
			t.Errorf("leaf for api.example.test verifies for %s", other)
		}
	}
	if got := leaf.Leaf.DNSNames; len(got) != 1 || got[0] != "api.example.test" {
		t.Errorf("SANs %v", got)
	}
	// Another CA's pool does not trust it.
	b, _ := New()
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: b.Pool(), DNSName: "api.example.test"}); err == nil {
		t.Error("leaf verifies against another CA")
	}
	// Validity: from about an hour ago to at most seven days.
	now := time.Now()
	if leaf.Leaf.NotBefore.After(now.Add(-50*time.Minute)) || leaf.Leaf.NotAfter.After(now.Add(leafLifetime+time.Minute)) {
		t.Errorf("validity %v .. %v", leaf.Leaf.NotBefore, leaf.Leaf.NotAfter)
	}
	if leaf.Leaf.IsCA {
		t.Error("leaf is a CA")
	}
}

func TestLeafOverRealTLS(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return a.Leaf("svc.test")
	}}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"svc.test", true},
		{"other.test", false},
	} {
		c, s := pipeConns(t)
		done := make(chan error, 1)
		go func() { done <- tls.Server(s, srvCfg).Handshake() }()
		err := tls.Client(c, &tls.Config{RootCAs: a.Pool(), ServerName: tc.name}).Handshake()
		c.Close()
		<-done
		if (err == nil) != tc.ok {
			t.Errorf("client expecting %s: err %v", tc.name, err)
		}
	}
}

func TestLeafRefusesBadNames(t *testing.T) {
	a, _ := New()
	for _, n := range []string{"", ".", "a..b", "-a.test", "a b", "a\x00b", "*.test", "a/b", string(make([]byte, 300))} {
		if _, err := a.Leaf(n); err == nil {
			t.Errorf("Leaf(%q) succeeded", n)
		}
	}
	if c, err := a.Leaf("127.0.0.7"); err != nil || len(c.Leaf.IPAddresses) != 1 {
		t.Errorf("IP leaf: %v", err)
	}
}

func TestLeafCacheBoundedAndRenewed(t *testing.T) {
	a, _ := New()
	a.cacheCap = 16
	first, _ := a.Leaf("n0.test")
	for i := range 100 {
		if _, err := a.Leaf(fmt.Sprintf("n%d.test", i)); err != nil {
			t.Fatal(err)
		}
		if a.lru.Len() > a.cacheCap || len(a.byName) != a.lru.Len() {
			t.Fatalf("cache holds %d/%d entries, cap %d", a.lru.Len(), len(a.byName), a.cacheCap)
		}
	}
	again, _ := a.Leaf("n99.test")
	if again2, _ := a.Leaf("n99.test"); again != again2 {
		t.Error("recent name not served from the cache")
	}
	if n0, _ := a.Leaf("n0.test"); n0 == first {
		t.Error("evicted name served from the cache")
	}

	// Near its end a leaf is minted again.
	now := time.Now()
	a.now = func() time.Time { return now }
	c1, _ := a.Leaf("renew.test")
	a.now = func() time.Time { return now.Add(leafLifetime - leafRenewLead/2) }
	c2, _ := a.Leaf("renew.test")
	if c1 == c2 || !c2.Leaf.NotAfter.After(c1.Leaf.NotAfter) {
		t.Error("leaf near expiry was not renewed")
	}
}

func TestLeafConcurrent(t *testing.T) {
	a, _ := New()
	a.cacheCap = 8
	pool := a.Pool()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				name := fmt.Sprintf("h%d.test", (g*7+i)%20)
				c, err := a.Leaf(name)
				if err == nil {
					_, err = c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if a.lru.Len() > 8 {
		t.Errorf("cache holds %d", a.lru.Len())
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_STATE_HOME", "/x/state")
	want := map[bool]string{true: "/home/u/Library/Application Support/sbx/ca", false: "/x/state/sbx/ca"}[runtime.GOOS == "darwin"]
	if d, err := DefaultDir(); err != nil || d != want {
		t.Errorf("DefaultDir = %s, %v; want %s", d, err, want)
	}
	// A relative XDG_STATE_HOME is ignored, as the XDG specification says.
	t.Setenv("XDG_STATE_HOME", "relative")
	want = map[bool]string{true: want, false: "/home/u/.local/state/sbx/ca"}[runtime.GOOS == "darwin"]
	if d, err := DefaultDir(); err != nil || d != want {
		t.Errorf("DefaultDir = %s, %v; want %s", d, err, want)
	}
}

func BenchmarkLeafCached(b *testing.B) {
	a, _ := New()
	if _, err := a.Leaf("bench.test"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := a.Leaf("bench.test"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeafUncached(b *testing.B) {
	a, _ := New()
	a.cacheCap = 1
	i := 0
	for b.Loop() {
		i++
		if _, err := a.Leaf(fmt.Sprintf("b%d.test", i)); err != nil {
			b.Fatal(err)
		}
	}
}
