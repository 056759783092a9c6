//go:build !linux

package execsrv

import (
	"context"
	"errors"
	"io"
)

// Serve is the guest's command server, which runs on Linux only.
func Serve(ctx context.Context, conn io.ReadWriteCloser, opts Options) error {
	conn.Close()
	return errors.ErrUnsupported
}
