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

	"github.com/sbx-dev/sbx/internal/builders/digest"
	"github.com/sbx-dev/sbx/internal/builders/download"
)

// fileServer serves fixed bodies over TLS; "/short" announces more bytes
// than it sends and "/downgrade" redirects to plain http.
func fileServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/downgrade":
			http.Redirect(w, r, "http://"+r.Host+"/vmlinuz", http.StatusFound)
			return
		case "/short":
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("only a few bytes"))
			return
		case "/auth":
			w.Write([]byte(r.Header.Get("Authorization") + " " + r.Header.Get("User-Agent")))
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sri512(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

func sha1Hex(b []byte) string {
	s := sha1.Sum(b)
	return hex.EncodeToString(s[:])
}

func TestGet(t *testing.T) {
	body := bytes.Repeat([]byte("kernel image bytes "), 5000)
	srv := fileServer(t, map[string][]byte{"/vmlinuz": body})
	client := srv.Client()
	ctx := context.Background()

	var buf bytes.Buffer
	got, err := download.Get(ctx, client, srv.URL+"/vmlinuz", nil, download.Want{SHA256: sha256Hex(body), Integrity: sri512(body), SHA1: sha1Hex(body), Size: int64(len(body))}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	want := download.Digests{Size: int64(len(body)), SHA256: sha256Hex(body), SHA1: sha1Hex(body), Integrity: sri512(body)}
	if got != want || !bytes.Equal(buf.Bytes(), body) {
		t.Errorf("got %+v, want %+v (and the body)", got, want)
	}

	other := sha256Hex([]byte("something else"))
	for _, c := range []struct {
		name string
		url  string
		want download.Want
		msg  []string
	}{
		{"sha256", "/vmlinuz", download.Want{SHA256: other}, []string{"sha256 mismatch", other, sha256Hex(body)}},
		{"integrity", "/vmlinuz", download.Want{Integrity: sri512([]byte("x"))}, []string{"sha512 mismatch", sri512([]byte("x")), sri512(body)}},
		{"sha1", "/vmlinuz", download.Want{SHA1: other[:40]}, []string{"sha1 mismatch", sha1Hex(body)}},
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
	// A correct sha1 does not save a wrong sha512.
	_, err := download.Get(context.Background(), client, srv.URL+"/p.tgz", nil, download.Want{Integrity: "sha1-" + sri512([]byte("x"))[7:] + " " + sri512([]byte("y"))}, nil)
	var mm *digest.MismatchError
	if !errors.As(err, &mm) || mm.Algo != "sha512" {
		t.Fatalf("err = %v, want a sha512 mismatch", err)
	}
	// Of two sha512 values, one matching is enough.
	if _, err := download.Get(context.Background(), client, srv.URL+"/p.tgz", nil, download.Want{Integrity: sri512([]byte("y")) + " " + sri512(body) + "?opt"}, nil); err != nil {
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
