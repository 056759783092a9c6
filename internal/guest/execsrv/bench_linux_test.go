package execsrv_test

import (
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/sbx-dev/sbx/internal/guest/execsrv"
	"github.com/sbx-dev/sbx/internal/guestconn"
)

// BenchmarkExecTrue measures one exec's round trip: request, fork and
// exec, exit, report.
func BenchmarkExecTrue(b *testing.B) {
	c := serve(b, execsrv.Options{})
	for b.Loop() {
		st, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"/bin/true"}})
		if err != nil || !st.Success() {
			b.Fatal(st, err)
		}
	}
}

// BenchmarkStdoutThroughput measures streaming stdout over the socket
// pair, flow control included.
func BenchmarkStdoutThroughput(b *testing.B) {
	c := serve(b, execsrv.Options{})
	const size = 64 << 20
	b.SetBytes(size)
	for b.Loop() {
		st, err := c.Exec(context.Background(), guestconn.Cmd{Args: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}, Stdout: io.Discard})
		if err != nil || !st.Success() {
			b.Fatal(st, err)
		}
	}
}
