package vmbench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/machine/qemu"
)

func TestSamples(t *testing.T) {
	ms := func(v ...int) Samples {
		var s Samples
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	var fifty []int
	for i := 50; i >= 1; i-- {
		fifty = append(fifty, i)
	}
	for _, c := range []struct {
		s                  Samples
		min, med, max, p90 time.Duration
	}{
		{ms(30, 10, 20), 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond},
		{ms(40, 10, 30, 20), 10 * time.Millisecond, 25 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond},
		{ms(fifty...), time.Millisecond, 25500 * time.Microsecond, 50 * time.Millisecond, 45 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 100), time.Millisecond, 5500 * time.Microsecond, 100 * time.Millisecond, 9 * time.Millisecond},
		{nil, 0, 0, 0, 0},
	} {
		if got := c.s.Min(); got != c.min {
			t.Errorf("%v: min %v, want %v", c.s, got, c.min)
		}
		if got := c.s.Median(); got != c.med {
			t.Errorf("%v: median %v, want %v", c.s, got, c.med)
		}
		if got := c.s.Max(); got != c.max {
			t.Errorf("%v: max %v, want %v", c.s, got, c.max)
		}
		if got := c.s.Percentile(90); got != c.p90 {
			t.Errorf("%v: p90 %v, want %v", c.s, got, c.p90)
		}
	}
	if s := ms(3, 1, 2); s.Median() != 2*time.Millisecond || s[0] != 3*time.Millisecond {
		t.Error("Median reordered the samples")
	}
	if got := Of(1.5, 0.02).List(Seconds); got != "1.50 s, 0.02 s" {
		t.Errorf("List = %q", got)
	}
}

func TestFigures(t *testing.T) {
	for got, want := range map[string]string{
		Ratio(3, 2): "1.50×", Ratio(0, 2): "n/a", Ratio(2, 0): "n/a",
		Size(1 << 30): "1 GiB", Size(4 << 20): "4 MiB", Size(3 << 10): "3 KiB", Size(100e6): "100000000 bytes", Size(0): "0 bytes",
		Seconds(1234 * time.Millisecond): "1.23 s", Millis(1500 * time.Microsecond): "1.5 ms",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if MBps(100e6, 4*time.Second) != 25 || MBps(1, 0) != 0 || PerSecond(200, 10*time.Second) != 20 || PerSecond(1, 0) != 0 {
		t.Error("MBps or PerSecond")
	}
	host := qemu.Host{Arch: "amd64", Accels: []qemu.Accel{qemu.AccelTCG}, Note: "no /dev/kvm"}
	bin := qemu.Binary{Path: "/usr/bin/qemu-system-x86_64", Version: qemu.Version{Major: 10, Minor: 0, Micro: 2}}
	if got, want := QEMU(host, bin), "QEMU 10.0.2 (/usr/bin/qemu-system-x86_64), accelerator tcg (no /dev/kvm)"; got != want {
		t.Errorf("QEMU = %q, want %q", got, want)
	}
}

func TestWorkDirAndLog(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir, remove, err := WorkDir("somebench", "")
	if err != nil || !filepath.IsAbs(dir) || filepath.Base(dir)[:len("somebench-")] != "somebench-" {
		t.Fatalf("WorkDir = %s, %v", dir, err)
	}
	remove()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a temporary work directory outlived remove: %v", err)
	}
	named := filepath.Join(t.TempDir(), "kept", "work")
	dir, remove, err = WorkDir("somebench", named)
	remove()
	if fi, serr := os.Stat(named); err != nil || dir != named || serr != nil || !fi.IsDir() {
		t.Errorf("a named work directory: %s, %v; after remove: %v", dir, err, serr)
	}

	var buf bytes.Buffer
	Log{W: &buf, Name: "somebench"}.Printf("round %d of %d", 1, 3)
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d somebench: round 1 of 3\n$`).Match(buf.Bytes()) {
		t.Errorf("Log wrote %q", buf.String())
	}
}

func TestExit(t *testing.T) {
	var buf bytes.Buffer
	if code := Exit(context.Background(), "somebench", &buf, nil, nil); code != 0 || buf.Len() != 0 {
		t.Errorf("no errors: %d, %q", code, buf.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code := Exit(ctx, "somebench", &buf, errors.New("boot failed"), errors.New("stop failed"))
	if want := "somebench: interrupted: boot failed\nsomebench: stop failed\n"; code != 1 || buf.String() != want {
		t.Errorf("Exit = %d, %q; want 1, %q", code, buf.String(), want)
	}
}

// TestSetupOutsideRepository checks that Setup stops at Preflight when it
// does not run from the repository's root (a test runs in its package's
// directory): nothing is logged or made, and remove may still be called.
func TestSetupOutsideRepository(t *testing.T) {
	var logged bytes.Buffer
	work := filepath.Join(t.TempDir(), "work")
	fix, remove, err := Setup(context.Background(), Log{W: &logged, Name: "setupbench"}, work, "making it in %s")
	if err == nil || !regexp.MustCompile(`go run \./bench/setupbench`).MatchString(err.Error()) {
		t.Fatalf("err = %v, want the Preflight error naming setupbench", err)
	}
	if fix != nil || remove == nil {
		t.Fatalf("fix = %v, remove nil: %v", fix, remove == nil)
	}
	remove()
	if logged.Len() != 0 {
		t.Errorf("logged %q before the checks passed", logged.String())
	}
	if _, err := os.Stat(work); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work directory: %v, want it not made", err)
	}
}
