//go:build unix

package socketpair

import (
	"io"
	"testing"
)

func TestNew(t *testing.T) {
	a, b := New(t)
	go func() {
		a.Write([]byte("ping"))
		a.Close()
	}()
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "ping" {
		t.Errorf("read %q, %v; want what the other end wrote, then EOF", got, err)
	}
}
