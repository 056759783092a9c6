package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/machine"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// Version is the format of a snapshot; a change of what is saved or of
// how a resume uses it changes it, and with it every Key.
const Version = 1

// Names of a snapshot's files.
const (
	StateFile  = "state"
	MemoryFile = "memory"
	DiskFile   = "disk.qcow2"
	MetaFile   = "meta.json"
)

// ErrMissing is Get's error when the cache holds no snapshot of a shape.
var ErrMissing = errors.New("no snapshot of this shape")

// Shape is what a snapshot is of: a resume needs the same of each.
type Shape struct {
	// Kernel, Initrd and Disk are the image's boot files' digests.
	Kernel string `json:"kernel"`
	Initrd string `json:"initrd"`
	Disk   string `json:"disk"`
	// DiskPath is the image's disk's absolute path: the saved disk is
	// an overlay that names it as its backing file, so a snapshot is of
	// the disk there and nowhere else (Get checks that it names it).
	DiskPath string `json:"disk_path"`
	// Platform and Cmdline are the image's platform and kernel
	// parameters.
	Platform string   `json:"platform"`
	Cmdline  []string `json:"cmdline,omitempty"`
	// CPUs and Memory size the machine.
	CPUs   int   `json:"cpus"`
	Memory int64 `json:"memory"`
	// Ports are the names of the machine's extra virtio-serial ports.
	Ports []string `json:"ports,omitempty"`
	// FSSlots is how many file system devices the machine can be given
	// once it runs (machine.Options.FSSlots).
	FSSlots int `json:"fs_slots,omitempty"`
	// Hypervisor names the hypervisor, its version and accelerator: a
	// state one saved another may not load.
	Hypervisor string `json:"hypervisor"`
}

// Key is the shape's name in the cache: a digest of everything in it and
// of Version.
func (s Shape) Key() string {
	s.Ports = slices.Sorted(slices.Values(s.Ports))
	b, _ := json.Marshal(struct {
		Version int   `json:"version"`
		Shape   Shape `json:"shape"`
	}{Version, s})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Meta is a snapshot's meta.json.
type Meta struct {
	Version int       `json:"version"`
	Key     string    `json:"key"`
	Shape   Shape     `json:"shape"`
	Created time.Time `json:"created"`
	// SaveMillis is how long the boot and the save took.
	SaveMillis int64 `json:"save_millis"`
	// The files' digests: sha256 of the state and the disk, and
	// MemoryDigest of the memory.
	State      string `json:"state_sha256"`
	Disk       string `json:"disk_sha256"`
	Memory     string `json:"memory_digest"`
	MemorySize int64  `json:"memory_size"`
	// MAC is the saved machine's network address, Ready its ready
	// line.
	MAC   string          `json:"mac"`
	Ready bootproto.Ready `json:"ready"`
}

// Snapshot is a verified snapshot, ready to resume machines from.
type Snapshot struct {
	Meta
	// Dir is the snapshot's directory.
	Dir string
	// Memory is the saved RAM, sealed (machine.SealMemory), shared by
	// every machine resumed from the snapshot in this process; the
	// cache owns it.
	Memory *os.File

	// state is the verified device state, a sealed copy: what a resume
	// loads is what was verified, whatever becomes of the state file.
	state *os.File
	// diskFile is the verified disk, open: resumes are made over it
	// (machine.Resume.DiskFile), not over what its path names later;
	// disk is it as it was verified, which Get checks the path still
	// names, to load a snapshot saved in its place since.
	diskFile *os.File
	disk     os.FileInfo
	// dirInfo is the snapshot's directory as it was loaded: Discard
	// removes that one, not another saved in its place since.
	dirInfo os.FileInfo
}

// Resume is what machine.Options.Resume needs of the snapshot; the
// caller closes State once the machine has started. It is of the files
// Get verified, whatever became of the snapshot's directory since.
func (s *Snapshot) Resume() (*machine.Resume, error) {
	// A descriptor of its own, with its own offset: the hypervisor
	// reads the state from it.
	st, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", s.state.Fd()), os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.Key, err)
	}
	return &machine.Resume{State: st, Memory: s.Memory, Disk: filepath.Join(s.Dir, DiskFile), DiskFile: s.diskFile, MAC: s.MAC, Ready: s.Ready}, nil
}

// current checks that the snapshot's disk path still names the file
// that was verified, unchanged.
func (s *Snapshot) current() error {
	fi, err := os.Lstat(filepath.Join(s.Dir, DiskFile))
	if err == nil && (!os.SameFile(fi, s.disk) || fi.Size() != s.disk.Size() || !fi.ModTime().Equal(s.disk.ModTime())) {
		err = errors.New("it is not the file that was verified")
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %s changed since it was verified: %w", s.Key, DiskFile, err)
	}
	return nil
}

func (s *Snapshot) close() {
	s.Memory.Close()
	s.state.Close()
	s.diskFile.Close()
}

// Cache is a directory of snapshots. Its methods are safe for concurrent
// use; a Cache keeps the sealed memory of each snapshot it loaded until
// Close, so that machines resumed in this process share it.
type Cache struct {
	dir string

	mu     sync.Mutex
	loaded map[string]*Snapshot
	// retired are snapshots loaded, then removed or saved again: a
	// machine may be starting from one, so its files stay open until
	// Close.
	retired []*Snapshot
	making  map[string]*sync.Mutex
}

// Open opens (making it, mode 0700) the snapshot cache in dir. The
// directory must be this user's: one of another user's is refused, and
// one of this user's that others may read or write is made private, as
// what is in it becomes the guests' memory and disk.
func Open(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot cache: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot cache: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("snapshot cache: %s is not a directory", dir)
	}
	if uid := owner(fi); uid != os.Geteuid() {
		return nil, fmt.Errorf("snapshot cache: %s belongs to user %d, not this one", dir, uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("snapshot cache: %w", err)
		}
	}
	return &Cache{dir: dir, loaded: map[string]*Snapshot{}, making: map[string]*sync.Mutex{}}, nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Close releases the memory of the snapshots loaded; machines resumed
// from them keep theirs.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.loaded {
		s.close()
		delete(c.loaded, k)
	}
	for _, s := range c.retired {
		s.close()
	}
	c.retired = nil
	return nil
}

// Get returns the snapshot of shape, verified: ErrMissing when there is
// none, another error when it does not verify (its files are then
// removed, so that the next start makes it again).
func (c *Cache) Get(shape Shape) (*Snapshot, error) {
	key := shape.Key()
	// One load per key at a time: concurrent starts of a shape wait
	// for the one copy of its memory rather than each making one.
	mu := c.keyLock(key)
	mu.Lock()
	defer mu.Unlock()
	return c.get(key, shape)
}

// keyLock is the mutex of key's loads and saves in this process.
func (c *Cache) keyLock(key string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	mu, ok := c.making[key]
	if !ok {
		mu = new(sync.Mutex)
		c.making[key] = mu
	}
	return mu
}

// get is Get with key's lock held.
func (c *Cache) get(key string, shape Shape) (*Snapshot, error) {
	c.mu.Lock()
	if s, ok := c.loaded[key]; ok {
		if s.current() == nil {
			c.mu.Unlock()
			return s, nil
		}
		// Removed or replaced since it was loaded: the next machines
		// are of what is there now. One may be starting from it (its
		// descriptors about to be handed to the hypervisor), so it is
		// not closed yet.
		delete(c.loaded, key)
		c.retired = append(c.retired, s)
	}
	c.mu.Unlock()
	s, err := c.load(key, shape)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.loaded[key]; ok {
		if old.current() == nil {
			s.close()
			return old, nil
		}
		c.retired = append(c.retired, old)
	}
	c.loaded[key] = s
	return s, nil
}

func (c *Cache) load(key string, shape Shape) (_ *Snapshot, err error) {
	dir := filepath.Join(c.dir, key)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	bad := func(format string, args ...any) error {
		c.discard(key, fi)
		return fmt.Errorf("snapshot %s: %s (removed; the next start saves it again)", key, fmt.Sprintf(format, args...))
	}
	if err := checkOwn(fi, fs.ModeDir); err != nil {
		return nil, bad("%s %v", key, err)
	}
	// Its files are opened in the directory that was checked, whatever
	// is renamed to its name meanwhile.
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, bad("%v", &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil || st.Dev != fi.Sys().(*syscall.Stat_t).Dev || st.Ino != fi.Sys().(*syscall.Stat_t).Ino {
		return nil, fmt.Errorf("snapshot %s: replaced as it was opened", key)
	}
	openOwn := func(name string) (*os.File, error) { return openOwn(dfd, dir, name) }
	mf, err := openOwn(MetaFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, bad("%v", err)
	}
	b, err := io.ReadAll(io.LimitReader(mf, maxMeta+1))
	mf.Close()
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(b) > maxMeta {
		return nil, bad("%s is larger than %d bytes", MetaFile, maxMeta)
	}
	var meta Meta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, bad("%s: %v", MetaFile, err)
	}
	if meta.Version != Version || meta.Key != key || meta.Shape.Key() != key {
		return nil, bad("%s is of another shape or format", MetaFile)
	}
	if meta.MemorySize != shape.Memory {
		return nil, bad("%s says the memory is %d bytes; the machine has %d", MetaFile, meta.MemorySize, shape.Memory)
	}
	s := &Snapshot{Meta: meta, Dir: dir, dirInfo: fi}
	defer func() {
		if err != nil {
			s.close()
		}
	}()

	// The state: copied, as it is digested, into a sealed file that is
	// then all a resume reads.
	sf, err := openOwn(StateFile)
	if err != nil {
		return nil, bad("%v", err)
	}
	s.state, err = sealedCopy(sf, meta.State)
	sf.Close()
	if err != nil {
		return nil, bad("%v", err)
	}

	// The disk: digested, and its backing file checked, from one
	// descriptor, whose file Resume checks the path still names.
	df, err := openOwn(DiskFile)
	if err != nil {
		return nil, bad("%v", err)
	}
	s.diskFile = df
	h := sha256.New()
	if _, err := io.Copy(h, df); err != nil {
		return nil, bad("%s: %v", DiskFile, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != meta.Disk {
		return nil, bad("%s has digest %s, not the %s it was saved with", DiskFile, got, meta.Disk)
	}
	backing, err := qcow2Backing(df)
	if err != nil {
		return nil, bad("%s: %v", DiskFile, err)
	}
	if backing != shape.DiskPath {
		return nil, bad("%s is an overlay of %q, not of the image's disk %q", DiskFile, backing, shape.DiskPath)
	}
	if s.disk, err = df.Stat(); err != nil {
		return nil, bad("%v", err)
	}

	f, err := openOwn(MemoryFile)
	if err != nil {
		return nil, bad("%v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != meta.MemorySize {
		return nil, bad("%s is not of the size it was saved with", MemoryFile)
	}
	d := newMemoryDigest()
	if s.Memory, err = machine.SealMemory(f, d.add); err != nil {
		return nil, bad("%v", err)
	}
	if got := d.sum(); got != meta.Memory {
		return nil, bad("%s has digest %s, not the %s it was saved with", MemoryFile, got, meta.Memory)
	}
	// A resume uses it: the least recently used go first (Prune).
	now := time.Now()
	unix.UtimesNanoAt(dfd, MetaFile, []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(now.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW)
	return s, nil
}

// Discard removes the snapshot of shape, which a resume could not use,
// so that the next start saves it again. Machines running or starting
// from it keep their files: the loaded copy is retired, closed at Close.
func (c *Cache) Discard(shape Shape) {
	key := shape.Key()
	c.mu.Lock()
	s, ok := c.loaded[key]
	if ok {
		delete(c.loaded, key)
		c.retired = append(c.retired, s)
	}
	c.mu.Unlock()
	if ok {
		c.discard(key, s.dirInfo)
	}
}

// Bounds on what load reads whole.
const (
	maxMeta  = 1 << 20
	maxState = 256 << 20
)

// owner is the user who owns a file.
func owner(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// checkOwn refuses a file that is not of type typ (a symbolic link
// never is), not this user's, or that others may write: such a file
// in the cache was planted, not saved.
func checkOwn(fi os.FileInfo, typ fs.FileMode) error {
	switch {
	case fi.Mode().Type() != typ:
		return fmt.Errorf("is of type %v, not %v", fi.Mode().Type(), typ)
	case owner(fi) != os.Geteuid():
		return fmt.Errorf("belongs to user %d, not this one", owner(fi))
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("may be written by others (mode %v)", fi.Mode().Perm())
	}
	return nil
}

// openOwn opens a snapshot's file, name in the directory dfd (at dir),
// for reading: never through a symbolic link, never blocking (on a
// planted FIFO), and only a regular file checkOwn accepts.
func openOwn(dfd int, dir, name string) (*os.File, error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err == nil {
		if err = checkOwn(fi, 0); err != nil {
			err = fmt.Errorf("%s %w", filepath.Base(path), err)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// qcow2Backing reads the backing file a qcow2 image names from its
// header, refusing an image with an external data file (whose path
// the hypervisor would open, and write, too).
func qcow2Backing(f *os.File) (string, error) {
	var h [104]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return "", fmt.Errorf("reading its header: %w", err)
	}
	if string(h[:4]) != "QFI\xfb" {
		return "", errors.New("not a qcow2 image")
	}
	version := binary.BigEndian.Uint32(h[4:])
	if version != 2 && version != 3 {
		return "", fmt.Errorf("qcow2 version %d", version)
	}
	if version == 3 && binary.BigEndian.Uint64(h[72:])&(1<<2) != 0 {
		return "", errors.New("it has an external data file")
	}
	off, size := binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint32(h[16:])
	if off == 0 || size == 0 || size > 1023 {
		return "", errors.New("it names no backing file")
	}
	name := make([]byte, size)
	if _, err := f.ReadAt(name, int64(off)); err != nil {
		return "", fmt.Errorf("reading its backing file's name: %w", err)
	}
	return string(name), nil
}

// discard removes a snapshot's directory, the one found there as fi:
// not another saved in its place since.
func (c *Cache) discard(key string, fi os.FileInfo) {
	dir := filepath.Join(c.dir, key)
	if now, err := os.Lstat(dir); err == nil && os.SameFile(now, fi) {
		os.RemoveAll(dir)
	}
}

// Saved is what a Create's save function reports of the machine it
// saved.
type Saved struct {
	MAC   string
	Ready bootproto.Ready
}

// SaveFunc boots a machine with its RAM in a new file at memory
// (machine.Options.MemoryFile) and saves it (machine.Machine.Save) to
// state and disk.
type SaveFunc func(ctx context.Context, memory string, state *os.File, disk string) (Saved, error)

// Create makes the snapshot of shape with save, unless one is there
// already, and returns it verified (Get). Concurrent Creates of one
// shape, in this process or others, save it once: the others wait for
// it under a lock on the cache.
func (c *Cache) Create(ctx context.Context, shape Shape, save SaveFunc) (*Snapshot, error) {
	key := shape.Key()
	mu := c.keyLock(key)
	mu.Lock()
	defer mu.Unlock()
	unlock, err := c.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if s, err := c.get(key, shape); !errors.Is(err, ErrMissing) {
		return s, err
	}
	// What a save of this shape left when its process died (the lock
	// is this one's: no other save of it is under way), memory and all.
	stale, _ := filepath.Glob(filepath.Join(c.dir, ".new-"+key+"-*"))
	for _, p := range stale {
		os.RemoveAll(p)
	}
	tmp, err := os.MkdirTemp(c.dir, ".new-"+key+"-")
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	defer os.RemoveAll(tmp)
	begin := time.Now()
	state, err := os.OpenFile(filepath.Join(tmp, StateFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	saved, err := save(ctx, filepath.Join(tmp, MemoryFile), state, filepath.Join(tmp, DiskFile))
	if err == nil {
		err = state.Sync()
	}
	state.Close()
	if err != nil {
		return nil, fmt.Errorf("saving a machine for warm starts: %w", err)
	}
	// QEMU made the memory file, and the disk, readable by all.
	for _, name := range []string{StateFile, MemoryFile, DiskFile} {
		if err := os.Chmod(filepath.Join(tmp, name), 0o600); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", key, err)
		}
	}
	meta := Meta{Version: Version, Key: key, Shape: shape, Created: time.Now().UTC(), SaveMillis: time.Since(begin).Milliseconds(), MAC: saved.MAC, Ready: saved.Ready}
	if meta.State, err = fileDigest(filepath.Join(tmp, StateFile)); err != nil {
		return nil, err
	}
	if meta.Disk, err = fileDigest(filepath.Join(tmp, DiskFile)); err != nil {
		return nil, err
	}
	if meta.Memory, meta.MemorySize, err = memoryDigest(filepath.Join(tmp, MemoryFile)); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, MetaFile), append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	final := filepath.Join(c.dir, key)
	os.RemoveAll(final) // a snapshot that did not verify
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	syncDir(c.dir)
	s, err := c.get(key, shape)
	if err == nil {
		// The new one is the most recently used: older ones go first.
		c.Prune(DefaultMaxBytes)
	}
	return s, err
}

// DefaultMaxBytes bounds the space the cache's snapshots take: Create
// removes the least recently used beyond it.
const DefaultMaxBytes = 4 << 30

// allocated is the space a file takes on disk (its blocks, not its size:
// a memory file is sparse).
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// lock takes the cache's lock on key, waiting while another process
// holds it, until ctx ends.
func (c *Cache) lock(ctx context.Context, key string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(c.dir, "."+key+".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("snapshot %s: lock: %w", key, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("snapshot %s: waiting for another start saving it: %w", key, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Entry is one snapshot in the cache, as List reports it.
type Entry struct {
	Key string
	// Meta is the snapshot's meta.json; zero when it cannot be read.
	Meta Meta
	// Bytes is the space its files take on disk.
	Bytes int64
	// Used is when a machine last resumed from it (its state file's
	// access time), else its creation.
	Used time.Time
}

// List returns the snapshots in the cache, newest first.
func (c *Cache) List() ([]Entry, error) {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot cache: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		e := Entry{Key: de.Name()}
		dir := filepath.Join(c.dir, de.Name())
		if b, err := os.ReadFile(filepath.Join(dir, MetaFile)); err == nil {
			json.Unmarshal(b, &e.Meta)
		}
		e.Used = e.Meta.Created
		for _, name := range []string{StateFile, MemoryFile, DiskFile, MetaFile} {
			fi, err := os.Lstat(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			e.Bytes += allocated(fi)
			if name == MetaFile {
				e.Used = fi.ModTime()
			}
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return b.Used.Compare(a.Used) })
	return out, nil
}

// Remove removes the snapshot key; machines running from it keep
// running (they hold its files open).
func (c *Cache) Remove(key string) error {
	if key == "" || strings.ContainsAny(key, "/.") {
		return fmt.Errorf("snapshot cache: %q is not a snapshot's key", key)
	}
	if _, err := os.Stat(filepath.Join(c.dir, key)); err != nil {
		return fmt.Errorf("snapshot cache: %w", err)
	}
	return os.RemoveAll(filepath.Join(c.dir, key))
}

// Prune removes the least recently used snapshots until those left take
// at most maxBytes, and returns what it removed.
func (c *Cache) Prune(maxBytes int64) ([]Entry, error) {
	es, err := c.List()
	if err != nil {
		return nil, err
	}
	var total int64
	var removed []Entry
	for _, e := range es {
		total += e.Bytes
		if total > maxBytes {
			if err := c.Remove(e.Key); err != nil {
				return removed, err
			}
			removed = append(removed, e)
		}
	}
	return removed, nil
}

// fileDigest is "sha256:<hex>" of a file.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// memoryDigest is the digest of a memory file (memoryDigestOf) and its
// size, read as SealMemory reads it.
func memoryDigest(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	d := newMemoryDigest()
	mem, err := machine.SealMemory(f, d.add)
	if err != nil {
		return "", 0, err
	}
	mem.Close()
	return d.sum(), fi.Size(), nil
}

// page is the unit of a memory digest.
const page = 4096

// memDigest digests a memory file's pages that are not all zeros, each
// with its offset: holes and zero pages alike count as zeros, so the
// digest is the content's, whatever the file's layout on disk.
type memDigest struct {
	h    hash.Hash
	zero [page]byte
}

func newMemoryDigest() *memDigest { return &memDigest{h: sha256.New()} }

// add takes data at offset off; SealMemory hands it page-aligned chunks.
func (d *memDigest) add(off int64, b []byte) {
	var o [8]byte
	for len(b) > 0 {
		n := min(page-int(off%page), len(b))
		if !bytes.Equal(b[:n], d.zero[:n]) {
			binary.BigEndian.PutUint64(o[:], uint64(off))
			d.h.Write(o[:])
			d.h.Write(b[:n])
		}
		off += int64(n)
		b = b[n:]
	}
}

func (d *memDigest) sum() string { return "mem1:" + hex.EncodeToString(d.h.Sum(nil)) }

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
