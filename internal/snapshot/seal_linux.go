package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// sealedCopy copies src into a new memory file sealed against writes,
// checking the copy against digest (fileDigest's form).
func sealedCopy(src *os.File, digest string) (*os.File, error) {
	path := src.Name()
	fd, err := unix.MemfdCreate("sbx-state", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	dst := os.NewFile(uintptr(fd), "sbx-state")
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), io.LimitReader(src, maxState+1))
	switch {
	case err != nil:
	case n > maxState:
		err = fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), maxState)
	case "sha256:"+hex.EncodeToString(h.Sum(nil)) != digest:
		err = fmt.Errorf("%s has digest sha256:%x, not the %s it was saved with", filepath.Base(path), h.Sum(nil), digest)
	default:
		_, err = unix.FcntlInt(dst.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	}
	if err != nil {
		dst.Close()
		return nil, err
	}
	return dst, nil
}
