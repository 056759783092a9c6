//go:build !linux

package vfsmount

import (
	"context"
	"errors"
)

// Mount is Linux's: the guest is always Linux.
func Mount(ctx context.Context, portPath, guestPath string, opts Options) error {
	return errors.New("vfsmount: only Linux guests mount host directories")
}

// MountFS is Linux's: the guest is always Linux.
func MountFS(ctx context.Context, tag, guestPath string, opts Options) error {
	return errors.New("vfsmount: only Linux guests mount host directories")
}
