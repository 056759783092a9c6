package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/kernel"
)

// An interrupt in the middle of reading a kernel package stops Load in
// the entry it is reading, and no further entry is read: the context is
// cancelled as the walk reaches one entry, and the walk must fail in that
// entry's body (the error names it) and go on to none after it.
func TestLoadStopsWhenInterrupted(t *testing.T) {
	path := synthDeb(t)
	for _, at := range []string{"boot/vmlinuz-" + kver, "kernel/drivers/net/virtio_net.ko", "kernel/fs/ext4/ext4.ko"} {
		t.Run(at, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var before, after []string
			defer kernel.SetWalked(func(name string) {
				if ctx.Err() != nil {
					after = append(after, name)
					return
				}
				before = append(before, name)
				if strings.HasSuffix(name, at) {
					cancel()
				}
			})()
			_, err := kernel.Load(ctx, path, kernel.Options{})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Load returned %v, want an error wrapping context.Canceled", err)
			}
			if len(before) == 0 || !strings.HasSuffix(before[len(before)-1], at) {
				t.Fatalf("the walk never reached %s (it read %v)", at, before)
			}
			if len(after) > 0 {
				t.Errorf("after the interrupt Load went on to read %d more entries: %v", len(after), after)
			}
			if !strings.Contains(err.Error(), at) {
				t.Errorf("Load's error %q does not name %s: it did not stop inside that entry", err, at)
			}
		})
	}
}

// ReadModules' pass over the archive stops the same way.
func TestReadModulesStopsWhenInterrupted(t *testing.T) {
	path := synthDeb(t)
	k, err := kernel.Load(context.Background(), path, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var other []*kernel.Module
	for _, name := range []string{"cyc_a", "fuse", "overlay"} {
		other = append(other, k.Modules[name])
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var after []string
	defer kernel.SetWalked(func(name string) {
		if ctx.Err() != nil {
			after = append(after, name)
			return
		}
		if n++; n == 3 {
			cancel()
		}
	})()
	_, err = k.ReadModules(ctx, other)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadModules returned %v, want an error wrapping context.Canceled", err)
	}
	if len(after) > 0 {
		t.Errorf("after the interrupt ReadModules went on to read %d more entries: %v", len(after), after)
	}
}
