//go:build linux

package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/proto/vfsproto"
	"github.com/sbx-dev/sbx/policy"
)

// Limits bound what one guest can make a mount's server hold. Zero
// fields take the defaults below.
type Limits struct {
	// Msize is the largest 9P message either side may send; a guest
	// asking for more is told this. Default vfsproto.MaxMsize.
	Msize uint32
	// Requests is how many requests may be in flight on a connection;
	// the server stops reading until one is answered. With Msize it
	// bounds the buffers requests and replies hold. Default 32.
	Requests int
	// Files is how many files (fids and the steps of walks) may exist at
	// once; beyond it walks fail with ENFILE. Default 16384.
	Files int
	// OpenFiles is how many host files may be open at once; beyond it
	// opens fail with EMFILE. Default 1024.
	OpenFiles int
	// DirEntries is the most entries one directory listing holds;
	// a larger directory fails to list with EOVERFLOW. Default 1<<17.
	DirEntries int
	// ListingBytes bounds the memory all directory listings being read
	// hold at once (ENOMEM beyond). Default 64 MiB.
	ListingBytes int64
	// TmpfsBytes bounds the tmpfs paths' data, names and nodes together
	// (ENOSPC beyond). Default 256 MiB.
	TmpfsBytes int64
	// RenameScan is the most entries checked when a directory is
	// renamed (EXDEV beyond). Default 100000.
	RenameScan int
	// Modes is how many host files may show the guest a mode the host
	// does not have: what a chmod or a create asked for beyond the
	// bits the host takes (modes.go). Beyond it the guest sees the
	// host's mode of the next such files. Default 65536.
	Modes int
}

func (l Limits) withDefaults() Limits {
	if l.Msize == 0 || l.Msize > vfsproto.MaxMsize {
		l.Msize = vfsproto.MaxMsize
	}
	if l.Msize < minMsize {
		l.Msize = minMsize
	}
	if l.Requests <= 0 {
		l.Requests = 32
	}
	if l.Files <= 0 {
		l.Files = 16384
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = 1024
	}
	if l.DirEntries <= 0 {
		l.DirEntries = 1 << 17
	}
	if l.ListingBytes <= 0 {
		l.ListingBytes = 64 << 20
	}
	if l.TmpfsBytes <= 0 {
		l.TmpfsBytes = 256 << 20
	}
	if l.RenameScan <= 0 {
		l.RenameScan = 100000
	}
	if l.Modes <= 0 {
		l.Modes = 65536
	}
	return l
}

// minMsize is the smallest message size served: room for a header, a
// walk of a few long names and a directory entry.
const minMsize = 8192

// Options configure a mount's server.
type Options struct {
	// HostDir is the mount's host directory, absolute: the policy's
	// Host joined with the configuration directory. It must exist and be
	// a directory.
	HostDir string
	// UID and GID own every file the guest sees: the numbers of the
	// mount's owner in the sandbox's image.
	UID, GID uint32
	Limits   Limits
	// Logger receives protocol errors of the guest's connection; nil
	// discards them.
	Logger *slog.Logger
}

// Server serves one mount of a sandbox: its host directory under its
// path rules, over 9P2000.L, to one guest connection at a time (Serve may
// be called again after a connection ends; in-memory paths live as long
// as the Server). It is safe against a guest that speaks the protocol
// directly: every message is bounded, every path is checked against the
// rules as the guest names it and resolved on the host without following
// any symbolic link.
type Server struct {
	fs  *fsys
	p9  *p9.Server
	lim Limits
	log *slog.Logger
}

// New opens the mount m's host directory and returns its server. The
// error names the directory when it is missing or not one.
func New(m policy.Mount, opts Options) (*Server, error) {
	rules, err := CompileRules(m)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", m.Guest, err)
	}
	if !filepath.IsAbs(opts.HostDir) {
		return nil, fmt.Errorf("mount %s: host directory %q is not absolute", m.Guest, opts.HostDir)
	}
	root, st, err := openRoot(opts.HostDir)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("mount %s: %s is not a directory", m.Guest, opts.HostDir)
		}
		return nil, fmt.Errorf("mount %s: %w", m.Guest, err)
	}
	umask, err := processUmask()
	if err != nil {
		unix.Close(root)
		return nil, fmt.Errorf("mount %s: %w", m.Guest, err)
	}
	lim := opts.Limits.withDefaults()
	fs := &fsys{
		root: root, rootDev: st.Dev, rules: rules, mem: newMemStore(lim.TmpfsBytes),
		uid: opts.UID, gid: opts.GID, lim: lim,
		mask: hostMask(umask), modes: newModeOverlay(lim.Modes),
	}
	if m.Access == policy.ReadWrite && !m.GitWritable {
		// A read-only mount changes nothing git reads on the host.
		fs.rules = rules.withGit(fs.scanGit(opts.HostDir))
	}
	for _, lit := range rules.TmpfsLiterals() {
		if err := fs.premake(lit); err != nil {
			unix.Close(root)
			return nil, fmt.Errorf("mount %s: tmpfs %s: %w", m.Guest, lit, err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{fs: fs, lim: lim, log: log}
	s.p9 = p9.NewServer(attacher{fs})
	return s, nil
}

// premake makes the empty directory a tmpfs pattern names exactly, so
// that it exists from the start as a tmpfs mount point would. Its
// parents are made in memory when they are themselves in memory, and
// otherwise left to the host (the directory appears once its host
// parent exists).
func (fs *fsys) premake(lit string) error {
	pl := fs.rules.place(lit)
	if pl.hidden || !pl.inMem {
		return nil
	}
	fs.mem.mu.Lock()
	defer fs.mem.mu.Unlock()
	names := strings.Split(lit, "/")
	for i := range names {
		rel := strings.Join(names[:i+1], "/")
		p := fs.rules.place(rel)
		if !p.inMem {
			continue
		}
		if _, err := fs.mem.lookup(p.memRoot, rel); err == nil {
			continue
		}
		n, err := fs.mem.newNode(unix.S_IFDIR|0o755, names[i])
		if err != nil {
			return err
		}
		if err := fs.mem.add(p.memRoot, rel, n); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the host directory and every host file a guest had
// open. Serve must have returned.
func (s *Server) Close() error {
	s.fs.closeAll()
	return unix.Close(s.fs.root)
}

// Serve answers the guest on conn until the connection ends (nil) or
// ctx is done (ctx's error); either way conn is closed. A protocol
// violation that cannot be answered (a message larger than the
// negotiated size, a truncated header) ends the connection with an error.
func (s *Server) Serve(ctx context.Context, conn io.ReadWriteCloser) error {
	c := newConn(conn, s.lim, s.log)
	return c.serve(ctx, s.p9)
}

type attacher struct{ fs *fsys }

// Attach implements p9.Attacher.
func (a attacher) Attach() (p9.File, error) { return a.fs.newFile("") }
