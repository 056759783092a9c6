//go:build !linux && !darwin

package qemu

import (
	"context"
	"errors"
	"time"
)

// errNoBootID is returned by bootID where the host has none.
var errNoBootID = errors.New("no boot id on this host")

func bootID() (string, error) { return "", errNoBootID }

// detectAccel finds no accelerator: sbx uses KVM on Linux and HVF on
// macOS only.
func detectAccel(ctx context.Context, b Binary, timeout time.Duration) (Accel, string) {
	return "", ""
}
