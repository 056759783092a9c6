package download_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/digest"
	"github.com/sbx-dev/sbx/internal/build/download"
)

// fileServer serves fixed bodies over TLS, and a few paths that
// misbehave: "/short" announces more bytes than it sends, "/downgrade"
// redirects to plain http, "/auth" echoes two request headers.
func fileServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	special := map[string]http.HandlerFunc{
		"/downgrade": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://"+r.Host+"/vmlinuz", http.StatusFound)
		},
		"/short": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("only a few bytes"))
		},
		"/auth": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(r.Header.Get("Authorization") + " " + r.Header.Get("User-Agent")))
		},
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := special[r.URL.Path]; h != nil {
			h(w, r)
		} else if b, ok := files[r.URL.Path]; ok {
			w.Write(b)
		} else {
			http.Error(w, "no such file", http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// digestsOf is what Get should report for b.
func digestsOf(b []byte) download.Digests {
	s256, s512, s1 := sha256.Sum256(b), sha512.Sum512(b), sha1.Sum(b)
	return download.Digests{
		Size: int64(len(b)), SHA256: hex.EncodeToString(s256[:]), SHA1: hex.EncodeToString(s1[:]),
		Integrity: "sha512-" + base64.StdEncoding.EncodeToString(s512[:]),
	}
}

func TestGet(t *testing.T) {
	body := bytes.Repeat([]byte("kernel image bytes "), 5000)
	srv := fileServer(t, map[string][]byte{"/vmlinuz": body})
	client := srv.Client()
	ctx := context.Background()

	want := digestsOf(body)
	var buf bytes.Buffer
	got, err := download.Get(ctx, client, srv.URL+"/vmlinuz", nil, download.Want{SHA256: want.SHA256, Integrity: want.Integrity, SHA1: want.SHA1, Size: want.Size}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || !bytes.Equal(buf.Bytes(), body) {
		t.Errorf("got %+v, want %+v (and the body)", got, want)
	}

	other := digestsOf([]byte("something else")).SHA256
	x := digestsOf([]byte("x")).Integrity
	for _, c := range []struct {
		name string
		url  string
		want download.Want
		msg  []string
	}{
		{"sha256", "/vmlinuz", download.Want{SHA256: other}, []string{"sha256 mismatch", other, want.SHA256}},
		{"integrity", "/vmlinuz", download.Want{Integrity: x}, []string{"sha512 mismatch", x, want.Integrity}},
		{"sha1", "/vmlinuz", download.Want{SHA1: other[:40]}, []string{"sha1 mismatch", want.SHA1}},
		{"size", "/vmlinuz", download.Want{Size: 3}, []string{"size mismatch"}},
		{"truncated", "/short", download.Want{}, []string{"of 1000 bytes"}},
		{"status", "/missing", download.Want{}, []string{"404 Not Found"}},
		{"sri without known hash", "/vmlinuz", download.Want{Integrity: "md5-AAAA"}, []string{"no supported hash"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := download.Get(ctx, client, srv.URL+c.url, nil, c.want, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
		})
	}
}

func TestGetIntegrityStrongestDecides(t *testing.T) {
	body := []byte("package")
	srv := fileServer(t, map[string][]byte{"/p.tgz": body})
	client := srv.Client()
	y := digestsOf([]byte("y")).Integrity
	// A correct sha1 does not save a wrong sha512.
	s1 := sha1.Sum(body)
	sha1SRI := "sha1-" + base64.StdEncoding.EncodeToString(s1[:])
	_, err := download.Get(context.Background(), client, srv.URL+"/p.tgz", nil, download.Want{Integrity: sha1SRI + " " + y}, nil)
	var mm *digest.MismatchError
	if !errors.As(err, &mm) || mm.Algo != "sha512" {
		t.Fatalf("err = %v, want a sha512 mismatch", err)
	}
	// Of two sha512 values, one matching is enough.
	if _, err := download.Get(context.Background(), client, srv.URL+"/p.tgz", nil, download.Want{Integrity: y + " " + digestsOf(body).Integrity + "?opt"}, nil); err != nil {
		t.Fatal(err)
	}
}

// The header given is sent, with sbx's user agent when it names none.
func TestGetSendsHeader(t *testing.T) {
	srv := fileServer(t, nil)
	var buf bytes.Buffer
	h := http.Header{"Authorization": {"Bearer t0ken"}}
	if _, err := download.Get(context.Background(), srv.Client(), srv.URL+"/auth", h, download.Want{}, &buf); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "Bearer t0ken "+download.UserAgent; got != want {
		t.Errorf("server saw %q, want %q", got, want)
	}
}

// A URL's user information never reaches an error, neither from Get's
// own messages nor from net/http's.
func TestGetCredentialsNotRepeated(t *testing.T) {
	srv := fileServer(t, nil)
	u := strings.Replace(srv.URL, "https://", "https://user:hunter2@", 1)
	for _, path := range []string{"/missing", "/short"} {
		_, err := download.Get(context.Background(), srv.Client(), u+path, nil, download.Want{}, nil)
		if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "user") {
			t.Errorf("%s: err = %v, want an error without credentials", path, err)
		}
	}
	// A transport error: net/http's *url.Error would quote the URL.
	_, err := download.Get(context.Background(), &http.Client{}, "https://user:hunter2@127.0.0.1:1/x", nil, download.Want{}, nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("dial error = %v, want it without credentials", err)
	}
}

// A redirect to plain http is refused; the same redirect without
// HTTPSOnly is followed, so the refusal is HTTPSOnly's.
func TestHTTPSOnly(t *testing.T) {
	srv := fileServer(t, map[string][]byte{"/vmlinuz": []byte("k")})
	_, err := download.Get(context.Background(), download.HTTPSOnly(srv.Client()), srv.URL+"/downgrade", nil, download.Want{}, nil)
	if err == nil || !strings.Contains(err.Error(), "refused redirect to http://") {
		t.Fatalf("err = %v, want the downgrade refused", err)
	}
	// The TLS server cannot answer plain http, so the followed redirect
	// fails differently.
	_, err = download.Get(context.Background(), srv.Client(), srv.URL+"/downgrade", nil, download.Want{}, nil)
	if err == nil || strings.Contains(err.Error(), "refused redirect") {
		t.Fatalf("without HTTPSOnly: err = %v, want the redirect followed", err)
	}
}
