package apkrepo_test

import (
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/build/apkrepo/apkrepotest"
)

var (
	keysOnce         sync.Once
	testKey, strange *apkrepotest.Key
)

// keys returns the repository key and a second key nobody trusts, made
// once per test binary (RSA key generation is slow).
func keys(t testing.TB) (*apkrepotest.Key, *apkrepotest.Key) {
	keysOnce.Do(func() {
		testKey = apkrepotest.NewKey(t, "sbx-test@test.invalid-65a1b2c3")
		strange = apkrepotest.NewKey(t, "someone-else@test.invalid-00000001")
	})
	return testKey, strange
}

func usrFile(name string) map[string]string {
	return map[string]string{"usr/share/doc/" + name + "/README": name + "\n"}
}

const indexPath = "/main/" + apkrepotest.Arch + "/APKINDEX.tar.gz"

func TestIndexVerifiedAndParsed(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, []apkrepotest.Package{
		{Name: "musl", Version: "1.2.5-r0", Provides: []string{"so:libc.musl-x86_64.so.1=1"}, Files: usrFile("musl")},
		{Name: "git", Version: "2.43.0-r0", Depends: []string{"musl", "so:libc.musl-x86_64.so.1"}, Provides: []string{"cmd:git=2.43.0-r0"}, Files: usrFile("git")},
	})
	ix := repo.Index(t)
	g := ix.Versions("git")
	if len(g) != 1 {
		t.Fatalf("git versions: %v", g)
	}
	p := g[0]
	if p.Version != "2.43.0-r0" || p.Checksum != repo.Built["git-2.43.0-r0"].Identity || p.Size != int64(len(repo.Built["git-2.43.0-r0"].APK)) {
		t.Errorf("git record: %+v", p)
	}
	if len(p.Depends) != 2 || p.Depends[1].Name != "so:libc.musl-x86_64.so.1" || len(p.Provides) != 1 || p.Provides[0] != (apkrepo.Provide{Name: "cmd:git", Version: "2.43.0-r0"}) {
		t.Errorf("git relations: %+v %+v", p.Depends, p.Provides)
	}
	if p.Repository != repo.Repository().URL {
		t.Errorf("repository %q", p.Repository)
	}
}

func TestIndexSignatures(t *testing.T) {
	k, other := keys(t)
	pkgs := []apkrepotest.Package{{Name: "zlib", Version: "1.3.1-r0", Files: usrFile("zlib")}}
	body := apkrepotest.IndexBody(t, "C:"+apkrepo.Identity([]byte("x"))+"\nP:zlib\nV:1.3.1-r0\nA:x86_64\n\n")
	tampered := apkrepotest.IndexBody(t, "C:"+apkrepo.Identity([]byte("x"))+"\nP:zlib\nV:9.9.9-r0\nA:x86_64\n\n")
	for _, tc := range []struct {
		name  string
		index []byte
		want  string // "" for success
	}{
		{"sha-1 signature", append(apkrepotest.SignatureMember(t, k, crypto.SHA1, body), body...), ""},
		{"sha-256 signature", append(apkrepotest.SignatureMember(t, k, crypto.SHA256, body), body...), ""},
		{"an unknown key's signature first, then a trusted one", concat(sigMember2(t, other, k, body), body), ""},
		{"unsigned", body, "unsigned"},
		{"signed by an unknown key", append(apkrepotest.SignatureMember(t, other, crypto.SHA1, body), body...), "not a trusted key"},
		{"body changed after signing", append(apkrepotest.SignatureMember(t, k, crypto.SHA1, body), tampered...), "does not verify"},
		{"extra member appended after signing", concat(apkrepotest.SignatureMember(t, k, crypto.SHA1, body), body, tampered), "does not verify"},
		{"signature over another body", append(apkrepotest.SignatureMember(t, k, crypto.SHA1, tampered), body...), "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := apkrepotest.NewRepo(t, k, pkgs)
			repo.Set(indexPath, tc.index)
			_, err := repo.Client(t).Index(apkrepotest.Ctx(t), []apkrepo.Repository{repo.Repository()})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			var se *apkrepo.SignatureError
			if !errors.As(err, &se) {
				t.Errorf("%v is not a *SignatureError", err)
			}
		})
	}
}

// sigMember2 is one signature member holding two signatures: by a and
// then by b.
func sigMember2(t *testing.T, a, b *apkrepotest.Key, signed []byte) []byte {
	sa := plain(t, apkrepotest.SignatureMember(t, a, crypto.SHA1, signed))
	sb := plain(t, apkrepotest.SignatureMember(t, b, crypto.SHA1, signed))
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(sa)
	w.Write(sb)
	w.Close()
	return out.Bytes()
}

func plain(t *testing.T, gz []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestIndexWithoutTrustedKeys(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, nil)
	c := repo.Client(t)
	c.Keys = nil
	if _, err := c.Index(apkrepotest.Ctx(t), []apkrepo.Repository{repo.Repository()}); err == nil || !strings.Contains(err.Error(), "no Alpine signing keys") {
		t.Fatalf("error %v", err)
	}
}

func TestParseKeyRefusesSmallKeys(t *testing.T) {
	k, _ := keys(t)
	if _, err := apkrepo.ParseKey(k.PublicPEM()); err != nil {
		t.Fatal(err)
	}
	priv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	small := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if _, err := apkrepo.ParseKey(small); err == nil || !strings.Contains(err.Error(), "1024 bits") {
		t.Fatalf("a 1024-bit key: %v", err)
	}
}

func TestParseRepositories(t *testing.T) {
	got, err := apkrepo.ParseRepositories([]byte("# comment\nhttps://mirror.test.invalid/alpine/v3.23/main/\n\n@edge https://mirror.test.invalid/alpine/edge/testing\n/var/cache/repo\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []apkrepo.Repository{{URL: "https://mirror.test.invalid/alpine/v3.23/main"}, {URL: "https://mirror.test.invalid/alpine/edge/testing", Tag: "edge"}, {URL: "file:///var/cache/repo"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("repository %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"ftp://x.invalid/alpine\n", "https://a.invalid https://b.invalid\n", "@ https://a.invalid\n"} {
		if _, err := apkrepo.ParseRepositories([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestIndexNeedsTheRepositoryCertificate(t *testing.T) {
	k, _ := keys(t)
	repo := apkrepotest.NewRepo(t, k, nil)
	c := repo.Client(t)
	c.HTTP = &http.Client{Timeout: 30 * time.Second}
	defer c.HTTP.CloseIdleConnections()
	if _, err := c.Index(apkrepotest.Ctx(t), []apkrepo.Repository{repo.Repository()}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("error %v", err)
	}
}

func TestParseIndexRefusesPathLikeNames(t *testing.T) {
	for _, rec := range []string{
		"C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:../../etc/passwd\nV:1-r0\nA:x86_64\n",
		"C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:/etc/passwd\nV:1-r0\nA:x86_64\n",
		"C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:git/../x\nV:1-r0\nA:x86_64\n",
		"C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:git\nV:1-r0\nA:../x\n",
		"C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:git\nV:1/../../x\nA:x86_64\n",
	} {
		if pkgs, err := apkrepo.ParseIndex(strings.NewReader(rec)); err == nil {
			t.Errorf("%q parsed: %+v", rec, pkgs[0])
		}
	}
}
