//go:build linux || darwin

package hostcheck

import "golang.org/x/sys/unix"

// freeBytes returns the space available to this user on the file system
// that holds path.
func freeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// writable reports whether this user may make entries in the directory
// path.
func writable(path string) bool {
	return unix.Access(path, unix.W_OK|unix.X_OK) == nil
}
