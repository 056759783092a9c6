package machine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/machine"
)

// BenchmarkExec measures round trips to a running guest: an exec of
// `true` (start, exit, status) and, for scale, a protocol ping, and the
// throughput of a command's stdout.
func BenchmarkExec(b *testing.B) {
	m := start(b, machine.Options{})
	ctx := context.Background()
	b.Run("true", func(b *testing.B) {
		for b.Loop() {
			st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"true"}})
			if err != nil || !st.Success() {
				b.Fatalf("true: %v %v", st, err)
			}
		}
	})
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Client().Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stdout-8MiB", func(b *testing.B) {
		const n = 8 << 20
		b.SetBytes(n)
		for b.Loop() {
			st, err := m.Exec(ctx, guestconn.Cmd{Args: []string{"head", "-c", strconv.Itoa(n), "/dev/zero"}})
			if err != nil || !st.Success() {
				b.Fatalf("head: %v %v", st, err)
			}
		}
	})
	b.StopTimer()
	begin := time.Now()
	if err := m.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("boot %v, stop %v", m.BootTime().Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
}
