//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// File modes. The guest's chmod, and the mode it creates a file or a
// directory with, reach the host only as far as they cannot weaken it:
//
//   - A host file or directory takes the guest's permission bits less
//     the server's mask: the umask of the process running it (the sbx
//     user's, read once in New) with group and other write always in
//     it. Nothing the guest does makes a host entry group- or
//     other-writable, or more open than the user's umask allows.
//   - Set-user-ID, set-group-ID and sticky bits never reach the host. A
//     directory keeps the set-group-ID and sticky bits the host gave it
//     (or it inherited on the host): the guest neither adds nor removes
//     them.
//   - The mount's root keeps its host mode whatever the guest asks.
//
// The guest still sees the mode it set: when the host took fewer bits
// than asked, the server remembers what the guest asked for, per host
// inode (dev, ino), and shows it in the guest's stat instead of the
// host's. `chmod +x` then `test -x`, `chmod 0600` on a key, `mkdir -m
// 0777` and `chmod -R 0777` look to the guest as they would on a disk of
// its own. Set-user-ID and set-group-ID bits are the exception over 9P:
// the 9P library drops them when it decodes a mode (it keeps the rwx
// bits and the sticky bit), so the guest's view never shows them, and
// `install -m 4755` shows 0755. (The guest's mount is nosuid, so a
// set-ID bit in its view would grant nothing.) A file the guest did not
// chmod shows the host's mode as it is.
//
// The remembered modes live as long as the Server, like the tmpfs
// paths; a new server (a sandbox started again) shows the host's modes.
// An entry holds only while the host's mode is the one the server left:
// a chmod on the host wins, and the entry is dropped. At most
// Limits.Modes entries are held; beyond that a chmod still reaches the
// host (masked) and the guest sees the host's mode.

// processUmask reads the process's umask without changing it (umask(2)
// would, for every thread at once).
func processUmask() (uint32, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the umask: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return 0, fmt.Errorf("reading the umask: /proc/self/status: bad Umask line %q", line)
			}
			return uint32(u) & 0o777, nil
		}
	}
	return 0, errors.New("reading the umask: /proc/self/status has no Umask line")
}

// hostMask is the permission bits no guest mode gives a host entry: the
// umask, and group and other write always.
func hostMask(umask uint32) uint32 { return umask&0o777 | 0o022 }

// guestBits is the part of a guest's mode that is permissions.
func guestBits(p p9.FileMode) uint32 { return uint32(p) & 0o7777 }

// hostBits is the permission bits a host entry of type ft takes for the
// guest's mode; cur is the entry's mode on the host now (0 when it is
// being made).
func (fs *fsys) hostBits(p p9.FileMode, ft, cur uint32) uint32 {
	perm := uint32(p) & 0o777 &^ fs.mask
	if ft&unix.S_IFMT == unix.S_IFDIR {
		perm |= cur & (unix.S_ISGID | unix.S_ISVTX)
	}
	return perm
}

// modeKey names a host inode.
type modeKey struct{ dev, ino uint64 }

// modeView is a mode the guest set that the host does not have.
type modeView struct {
	host  uint32 // the entry's type and permission bits on the host, as the server left them
	guest uint32 // the permission bits the guest set
}

// modeOverlay is what the guest set, for the host entries whose mode
// differs from it.
type modeOverlay struct {
	mu  sync.Mutex
	max int
	m   map[modeKey]modeView
}

func newModeOverlay(max int) *modeOverlay {
	return &modeOverlay{max: max, m: map[modeKey]modeView{}}
}

const typeAndPerm = unix.S_IFMT | 0o7777

// set records that the guest set the permission bits guest on the host
// entry st (its stat after the change).
func (o *modeOverlay) set(st *unix.Stat_t, guest uint32) {
	k := modeKey{st.Dev, st.Ino}
	o.mu.Lock()
	defer o.mu.Unlock()
	if guest == st.Mode&0o7777 {
		delete(o.m, k)
		return
	}
	if _, ok := o.m[k]; !ok && len(o.m) >= o.max {
		return
	}
	o.m[k] = modeView{host: st.Mode & typeAndPerm, guest: guest}
}

// mode is the mode the guest sees for the host entry st.
func (o *modeOverlay) mode(st *unix.Stat_t) uint32 {
	k := modeKey{st.Dev, st.Ino}
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.m[k]
	switch {
	case !ok:
		return st.Mode
	case v.host != st.Mode&typeAndPerm:
		// Changed on the host since, or another inode by now.
		delete(o.m, k)
		return st.Mode
	}
	return st.Mode&^0o7777 | v.guest
}

// forget drops what is held for the host entry st, which is gone.
func (o *modeOverlay) forget(st *unix.Stat_t) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, modeKey{st.Dev, st.Ino})
}

// gone forgets the entry st if removing one of its names removed it.
func (o *modeOverlay) gone(st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Nlink <= 1 {
		o.forget(st)
	}
}

func (o *modeOverlay) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}
