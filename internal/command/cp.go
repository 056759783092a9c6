package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/internal/guestconn"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

const cpUsage = `
Usage: sbx cp [options] [DIR] SANDBOX:PATH HOSTPATH|-
       sbx cp [options] [DIR] HOSTPATH|- SANDBOX:PATH

  Copy one file out of or into the running sandbox SANDBOX of the
  configuration in DIR (default: the current directory). PATH is absolute
  in the guest. "-" is standard output (out) or standard input (in).

  Out: the guest's regular file is written to a temporary file beside
  HOSTPATH and renamed over it only once it arrived whole, with the size
  the guest announced, so nothing is left half-written. When HOSTPATH is
  a directory (not a symbolic link to one, unless written with a trailing
  "/"), the file goes into it under PATH's last name. A symbolic link
  where the file goes is replaced, never written through. The file gets
  the guest file's permission bits (rwx only: never set-user-ID,
  set-group-ID or sticky) less this process's umask, and never group or
  other write.

  In: the file replaces PATH in the guest atomically (a temporary file
  renamed), or goes into PATH when PATH ends in "/"; the parent directory
  must exist. It keeps the host file's permission bits (0644 from
  standard input) and is owned by root unless -chown says otherwise.

  Directories are not copied; stream a tar through "sbx exec -i" instead.

Options:

  -chown UID[:GID]    Owner of a file copied in (numeric; GID defaults to UID).
`

func runCp(ctx context.Context, env *Env, args []string) int {
	var chown string
	flags := newFlagSet("cp")
	flags.StringVar(&chown, "chown", "", "")
	pos, code, ok := parseArgs(env, flags, cpUsage, args)
	if !ok {
		return code
	}
	dir := "."
	if len(pos) == 3 {
		dir, pos = pos[0], pos[1:]
	}
	if len(pos) != 2 {
		usageError(env, "cp", "Invalid arguments", fmt.Sprintf("sbx cp takes [DIR] SRC DST, one of them SANDBOX:PATH; got %q.", strings.Join(pos, " ")))
		return ExitError
	}
	var owner *guestconn.Owner
	if chown != "" {
		var err error
		if owner, err = parseOwner(chown); err != nil {
			usageError(env, "cp", "Invalid -chown", fmt.Sprintf("-chown %q: %v.", chown, err))
			return ExitError
		}
	}
	srcBox, srcPath, srcIn := splitGuestPath(pos[0])
	dstBox, dstPath, dstIn := splitGuestPath(pos[1])
	switch {
	case srcIn && dstIn:
		usageError(env, "cp", "Invalid arguments", "Both paths are in a sandbox; one must be on the host.")
		return ExitError
	case !srcIn && !dstIn:
		usageError(env, "cp", "Invalid arguments", "Neither path is in a sandbox; write one as SANDBOX:PATH.")
		return ExitError
	case srcIn && owner != nil:
		usageError(env, "cp", "Invalid -chown", "-chown applies to files copied into a sandbox.")
		return ExitError
	}
	box, guestPath := srcBox, srcPath
	if dstIn {
		box, guestPath = dstBox, dstPath
	}
	if !path.IsAbs(guestPath) {
		usageError(env, "cp", "Invalid arguments", fmt.Sprintf("%s:%s: the path in the sandbox must be absolute.", box, quoteText(guestPath)))
		return ExitError
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	sdir, err := runtimeDir(env, dir, box)
	if err != nil {
		errorFrom(env, fmt.Sprintf("Cannot find sandbox.%s", box), err, true)
		return ExitError
	}
	c, err := supervisor.Dial(ctx, sdir)
	if err != nil {
		if errors.Is(err, supervisor.ErrNotRunning) {
			notRunning(env, "cp", dir, box, nil)
		} else {
			errorFrom(env, fmt.Sprintf("Cannot reach sandbox.%s", box), err, true)
		}
		return ExitError
	}
	defer c.Close()
	if srcIn {
		err = copyOut(ctx, env, c, guestPath, pos[1])
	} else {
		err = copyIn(ctx, env, c, pos[0], guestPath, owner)
	}
	if err != nil {
		errorFrom(env, "Copy failed", err, true)
		if ctx.Err() != nil {
			return ExitInterrupted
		}
		return ExitError
	}
	return ExitOK
}

// splitGuestPath splits "SANDBOX:PATH". A host path that holds a colon
// can be written with a directory in front ("./a:b").
func splitGuestPath(s string) (box, p string, ok bool) {
	box, p, ok = strings.Cut(s, ":")
	if !ok || box == "" || strings.ContainsAny(box, `/\`) {
		return "", s, false
	}
	return strings.TrimPrefix(box, "sandbox."), p, true
}

func parseOwner(s string) (*guestconn.Owner, error) {
	u, g, hasGID := strings.Cut(s, ":")
	uid, err := strconv.ParseUint(u, 10, 31)
	if err != nil {
		return nil, errors.New("write a numeric UID[:GID]")
	}
	gid := uid
	if hasGID {
		if gid, err = strconv.ParseUint(g, 10, 31); err != nil {
			return nil, errors.New("write a numeric UID[:GID]")
		}
	}
	return &guestconn.Owner{UID: int(uid), GID: int(gid)}, nil
}

func copyOut(ctx context.Context, env *Env, c *guestconn.Client, guestPath, dst string) error {
	if dst == "-" {
		_, err := c.Get(ctx, guestPath, env.Stdout)
		return err
	}
	dir, name := filepath.Split(dst)
	if name == "" {
		// "DIR/": the directory, whatever leads there.
		fi, err := os.Stat(dst)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dst)
		}
		dir, name = dst, path.Base(guestPath)
	} else if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
		dir, name = dst, path.Base(guestPath)
	}
	if name == "/" || name == "." || name == ".." {
		return fmt.Errorf("%s: name the host file to write", dst)
	}
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return receiveFile(root, name, func(open func(fs.FileMode) (io.Writer, error)) error {
		_, err := c.GetFunc(ctx, guestPath, func(info *guestconn.FileInfo) (io.Writer, error) {
			return open(info.Mode)
		})
		return err
	})
}

// receiveFile writes the file name directly in root with get, which
// calls open with the mode the guest reports once it is known, then
// writes the content to what open returned. The content goes to a new
// temporary file in root (created exclusively, so nothing planted at its
// name is followed), renamed over name only when get succeeded: a
// symbolic link at name is replaced, never written through, and a
// failed copy leaves nothing behind. The file has only the permission
// bits of the guest's mode, less group and other write and less the
// umask: the temporary file is created with them and the kernel applies
// the umask as for any new file. So, as for the workspace's files
// (internal/vfs), no mode the guest reports makes a host file group- or
// other-writable, whatever the umask lets through. Set-user-ID,
// set-group-ID and sticky bits are dropped, and the mode is not changed
// after creation.
func receiveFile(root *os.Root, name string, get func(open func(fs.FileMode) (io.Writer, error)) error) (err error) {
	target := filepath.Join(root.Name(), name)
	var (
		f   *os.File
		tmp string
	)
	defer func() {
		if err == nil {
			return
		}
		if f != nil {
			f.Close()
			root.Remove(tmp)
		}
		err = fmt.Errorf("writing %s: %w", target, err)
	}()
	open := func(mode fs.FileMode) (io.Writer, error) {
		if f != nil {
			return nil, errors.New("the file was opened twice")
		}
		for try := 0; ; try++ {
			tmp = "." + name + ".sbx-cp-" + strconv.FormatUint(uint64(rand.Uint32()), 10)
			var err error
			f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode&fs.ModePerm&^0o022)
			if err == nil {
				return f, nil
			}
			if !errors.Is(err, fs.ErrExist) || try == 100 {
				return nil, err
			}
		}
	}
	if err = get(open); err != nil {
		return err
	}
	if f == nil {
		return errors.New("the guest sent no file")
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		f = nil
		root.Remove(tmp)
		return err
	}
	if err = root.Rename(tmp, name); err != nil {
		f = nil
		root.Remove(tmp)
		return err
	}
	if d, derr := root.Open("."); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
func copyIn(ctx context.Context, env *Env, c *guestconn.Client, src, guestPath string, owner *guestconn.Owner) error {
	var r io.Reader
	mode := fs.FileMode(0o644)
	if src == "-" {
		r = env.Stdin
		if strings.HasSuffix(guestPath, "/") {
			return fmt.Errorf("%s: name the file to write from standard input", guestPath)
		}
	} else {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory; sbx cp copies one file (stream a tar through \"sbx exec -i\" for a tree)", src)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", src)
		}
		mode = fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		r = f
		if strings.HasSuffix(guestPath, "/") {
			guestPath += filepath.Base(src)
		}
	}
	return c.Put(ctx, r, guestPath, mode, owner)
}
