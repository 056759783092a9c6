package ca

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-dev/sbx/internal/atomicfile"
)

// File names inside the CA directory.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca-key.pem"
	lockFile = ".lock"
)

// maxPEM bounds what LoadOrCreate reads from a file: a CA certificate or
// key is a few hundred bytes.
const maxPEM = 64 << 10

// UnsafeError reports a CA directory or file that LoadOrCreate will not
// trust: a symbolic link, something owned by another user, a directory
// others may write to or a key others may read.
type UnsafeError struct {
	Path   string
	Reason string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("refusing CA path %s: %s", e.Path, e.Reason)
}

// DefaultDir returns where the user's CA lives: $XDG_STATE_HOME/sbx/ca,
// else ~/.local/state/sbx/ca; on macOS ~/Library/Application
// Support/sbx/ca.
func DefaultDir() (string, error) {
	if runtime.GOOS == "darwin" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, "Library", "Application Support", "sbx", "ca"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "sbx", "ca"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "sbx", "ca"), nil
}

func caName() string {
	who := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("sbx sandbox CA (%s@%s)", who, host)
}

// LoadOrCreate loads the CA from dir/ca.pem and dir/ca-key.pem, creating
// both (an ECDSA P-256 key and a ten-year certificate) when they are
// absent. dir is created mode 0700 if missing. It refuses (with an
// *UnsafeError naming the path) a dir that is a symbolic link, owned by
// another user or writable by group or others, and a file that is a
// symbolic link, not a regular file, owned by another user, or, for the
// key, readable by group or others. The key is written mode 0600 to a
// temporary file and renamed into place. Concurrent first runs, in one
// process or several, take a lock in dir and so end up with the same CA.
func LoadOrCreate(dir string) (*Authority, error) {
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	lock, err := openNoFollow(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking CA directory: %w", err)
	}
	defer lock.Close()
	if err := checkFile(lock, filepath.Join(dir, lockFile), false); err != nil {
		return nil, err
	}
	if err := flock(lock); err != nil {
		return nil, fmt.Errorf("locking CA directory %s: %w", dir, err)
	}

	a, err := load(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	certDER, key, err := create(caName(), time.Now())
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// The key goes first: a crash between the two writes leaves no
	// certificate, so the next run creates both again rather than
	// pairing a certificate with a key it does not belong to.
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := atomicfile.WriteIn(root, KeyFile, 0o600, writeBytes(keyPEM)); err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	if err := atomicfile.WriteIn(root, CertFile, 0o644, writeBytes(certPEM)); err != nil {
		return nil, err
	}
	return fromParts(certDER, key)
}

func writeBytes(b []byte) func(*os.File) error {
	return func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}
}

// ensureDir creates dir (and missing parents) mode 0700 and checks that
// what is there is a real directory of ours that nobody else may write.
func ensureDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return fmt.Errorf("creating CA directory: %w", err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating CA directory: %w", err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("CA directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &UnsafeError{Path: dir, Reason: "it is a symbolic link"}
	}
	if !fi.IsDir() {
		return &UnsafeError{Path: dir, Reason: "it is not a directory"}
	}
	if err := checkOwner(fi, dir); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &UnsafeError{Path: dir, Reason: fmt.Sprintf("mode %04o lets other users replace its files (want 0700)", fi.Mode().Perm())}
	}
	return nil
}

func checkOwner(fi fs.FileInfo, path string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &UnsafeError{Path: path, Reason: "cannot tell its owner"}
	}
	if int(st.Uid) != os.Geteuid() {
		return &UnsafeError{Path: path, Reason: fmt.Sprintf("it is owned by uid %d, not by this user (uid %d)", st.Uid, os.Geteuid())}
	}
	return nil
}

// checkFile checks an opened file: regular, ours, and, for a private
// key, neither readable nor writable by group or others.
func checkFile(f *os.File, path string, private bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &UnsafeError{Path: path, Reason: "it is not a regular file"}
	}
	if err := checkOwner(fi, path); err != nil {
		return err
	}
	if private && fi.Mode().Perm()&0o077 != 0 {
		return &UnsafeError{Path: path, Reason: fmt.Sprintf("mode %04o lets other users read the CA key (want 0600)", fi.Mode().Perm())}
	}
	if !private && fi.Mode().Perm()&0o022 != 0 {
		return &UnsafeError{Path: path, Reason: fmt.Sprintf("mode %04o lets other users change it", fi.Mode().Perm())}
	}
	return nil
}

// openNoFollow opens path without following a symbolic link at its last
// element, reporting one as an *UnsafeError.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &UnsafeError{Path: path, Reason: "it is a symbolic link"}
		}
		return nil, err
	}
	return f, nil
}

// readPEM reads the single PEM block of the given type in path.
func readPEM(path, typ string, private bool) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkFile(f, path, private); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxPEM {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", path, maxPEM)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != typ {
		return nil, fmt.Errorf("reading %s: no PEM %s block", path, typ)
	}
	return block.Bytes, nil
}

// load reads an existing CA; an error wrapping fs.ErrNotExist means that
// the key or the certificate is absent and both should be created.
func load(dir string) (*Authority, error) {
	keyPath, certPath := filepath.Join(dir, KeyFile), filepath.Join(dir, CertFile)
	keyDER, err := readPEM(keyPath, "PRIVATE KEY", true)
	if err != nil {
		return nil, err
	}
	certDER, err := readPEM(certPath, "CERTIFICATE", false)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", keyPath, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("reading %s: not an ECDSA key", keyPath)
	}
	a, err := fromParts(certDER, key)
	if err != nil {
		return nil, fmt.Errorf("CA in %s: %w", dir, err)
	}
	return a, nil
}
