package repoget

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(strings.Repeat("x", 10)))
	}))
	defer srv.Close()
	ctx := context.Background()
	if b, err := Get(ctx, srv.Client(), srv.URL+"/f", 10); err != nil || len(b) != 10 {
		t.Errorf("Get = %q, %v", b, err)
	}
	var tl *TooLargeError
	if _, err := Get(ctx, srv.Client(), srv.URL+"/f", 9); !errors.As(err, &tl) || tl.Limit != 9 {
		t.Errorf("over the limit: %v", err)
	}
	var se *StatusError
	if _, err := Get(ctx, srv.Client(), srv.URL+"/missing", 9); !errors.As(err, &se) || se.Code != 404 {
		t.Errorf("a 404: %v", err)
	}
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("local"), 0o644)
	if b, err := Get(ctx, nil, "file://"+p, 5); err != nil || string(b) != "local" {
		t.Errorf("file URL: %q, %v", b, err)
	}
}
