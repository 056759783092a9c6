package resolve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/lang"
)

// fileServer serves fixed bodies over TLS; "/short" announces more bytes
// than it sends.
func fileServer(t *testing.T, files map[string][]byte) (*httptest.Server, *requestLog) {
	t.Helper()
	log := &requestLog{}
	srv := httptest.NewTLSServer(log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/downgrade" {
			http.Redirect(w, r, "http://"+r.Host+"/vmlinuz", http.StatusFound)
			return
		}
		if r.URL.Path == "/short" {
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("only a few bytes"))
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		w.Write(b)
	})))
	t.Cleanup(srv.Close)
	return srv, log
}

func urlSource(u, sha string) *lang.Source {
	return &lang.Source{Kind: lang.SourceURL, Raw: u, Ref: u, SHA256: sha}
}

func TestURLResolver(t *testing.T) {
	body := []byte("moltnet release tarball")
	srv, _ := fileServer(t, map[string][]byte{"/moltnet.tar.gz": body})
	s := New(Options{HTTPClient: tlsClient(t, srv)})
	ctx := context.Background()
	u := srv.URL + "/moltnet.tar.gz"

	// Declared: verified, and "sha256:" and upper case are accepted.
	pin, err := s.Resolve(ctx, urlSource(u, "sha256:"+strings.ToUpper(sha256Hex(body))), linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if pin.SHA256 != sha256Hex(body) || pin.Kind != "url" || pin.Source != u {
		t.Errorf("pin = %+v", pin)
	}
	// Not declared: trust on first use.
	pin, err = s.Resolve(ctx, urlSource(u, ""), linuxAMD64)
	if err != nil || pin.SHA256 != sha256Hex(body) {
		t.Fatalf("pin = %+v, err = %v", pin, err)
	}

	wrong := sha256Hex([]byte("tampered"))
	for _, c := range []struct {
		name string
		src  *lang.Source
		msg  []string
	}{
		{"tampered", urlSource(u, wrong), []string{wrong, sha256Hex(body), "mismatch"}},
		{"truncated", urlSource(srv.URL+"/short", ""), []string{"16 of 1000 bytes"}},
		{"not found", urlSource(srv.URL+"/gone", ""), []string{"404"}},
		{"redirect to http", urlSource(srv.URL+"/downgrade", ""), []string{"refused redirect to http://"}},
		{"plain http", urlSource(strings.Replace(u, "https:", "http:", 1), ""), []string{"only https"}},
		{"bad declared hash", urlSource(u, "abc"), []string{"not 64 hex digits"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Resolve(ctx, c.src, linuxAMD64)
			if err == nil {
				t.Fatal("no error")
			}
			for _, m := range append(c.msg, c.src.Raw) {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
		})
	}
}

func TestURLCredentialsNotRepeated(t *testing.T) {
	srv, _ := fileServer(t, nil)
	s := New(Options{HTTPClient: tlsClient(t, srv)})
	u := strings.Replace(srv.URL, "https://", "https://user:hunter2@", 1) + "/x"
	_, err := s.Resolve(context.Background(), urlSource(u, ""), linuxAMD64)
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "user") {
		t.Fatalf("err = %v, want an error without credentials", err)
	}
}

func TestFileResolver(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "files", "motd"), "hello\n")
	s := New(Options{Dir: dir})
	src := &lang.Source{Kind: lang.SourceFile, Raw: "file:files/motd", Ref: "files/motd"}
	pin, err := s.Resolve(context.Background(), src, linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if pin.SHA256 != sha256Hex([]byte("hello\n")) || pin.Kind != "file" {
		t.Errorf("pin = %+v", pin)
	}

	missing := &lang.Source{Kind: lang.SourceFile, Raw: "file:nope/gone", Ref: "nope/gone"}
	_, err = s.Resolve(context.Background(), missing, linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "nope/gone")) {
		t.Errorf("err = %v, want the missing path", err)
	}

	wrong := &lang.Source{Kind: lang.SourceFile, Raw: "file:files/motd", Ref: "files/motd", SHA256: sha256Hex([]byte("x"))}
	if _, err := s.Resolve(context.Background(), wrong, linuxAMD64); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Errorf("err = %v, want a mismatch", err)
	}
	notRegular := &lang.Source{Kind: lang.SourceFile, Raw: "file:files", Ref: "files"}
	if _, err := s.Resolve(context.Background(), notRegular, linuxAMD64); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("err = %v, want not a regular file", err)
	}
}

func TestUnknownKind(t *testing.T) {
	s := New(Options{})
	_, err := s.Resolve(context.Background(), &lang.Source{Kind: "git", Raw: "git:x"}, linuxAMD64)
	if err == nil || !strings.Contains(err.Error(), `unknown source kind "git"`) {
		t.Errorf("err = %v", err)
	}
}

// TestURLResolverMirror checks that a url source with a declared sha256
// is pinned from a copy in the mirror directory without a download, even
// when its host cannot be reached, and that an unreachable host without
// a copy is an error naming the variable behind the URL and the mirror.
func TestURLResolverMirror(t *testing.T) {
	body := []byte("moltnet release tarball")
	sha := sha256Hex(body)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "moltnet_linux_amd64.tar.gz"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const unreachable = "https://127.0.0.1:1/download/moltnet_linux_amd64.tar.gz"
	src := urlSource(unreachable, sha)
	src.Vars = []string{"moltnet_url"}

	pin, err := New(Options{MirrorDir: dir}).Resolve(ctx, src, linuxAMD64)
	if err != nil || pin.SHA256 != sha {
		t.Fatalf("pin from the mirror = %+v, %v", pin, err)
	}
	// Without a declared sha256 a copy is not taken on trust.
	if _, err := New(Options{MirrorDir: dir}).Resolve(ctx, urlSource(unreachable, ""), linuxAMD64); err == nil {
		t.Error("a copy was pinned without a declared sha256")
	}
	_, err = New(Options{}).Resolve(ctx, src, linuxAMD64)
	if err == nil {
		t.Fatal("an unreachable URL was pinned")
	}
	for _, want := range []string{"var.moltnet_url", "-var moltnet_url=", "SBX_VAR_moltnet_url", "SBX_MIRROR_DIR", sha} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
