package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sbx-dev/sbx/internal/build/cache"
	"github.com/sbx-dev/sbx/internal/supervisor"
)

// runtimeNameRoom is the sandbox name length RuntimeBase promises room
// for in socket paths; the runtime directory is checked with a name this
// long when no configuration names sandboxes.
const runtimeNameRoom = 24

// probeConfigDir stands for a configuration directory in the socket path
// check: SandboxDir hashes it to a fixed length, and a directory of that
// hash does not exist, so the check changes nothing.
const probeConfigDir = "/nonexistent/sbx-doctor"

// checkRuntimeDir checks the directory sandboxes' supervisors keep their
// sockets in (supervisor.RuntimeBase): that it is this user's own real
// directory with mode 0700, that the directories above it pass the
// supervisor's checks, and that socket paths fit for the configuration's
// sandbox names.
func checkRuntimeDir(opts *Options) Result {
	r := Result{Name: "runtime-dir"}
	base := supervisor.RuntimeBase(opts.Environ)
	private := "mkdir -m 700 -p ~/.sbx-run && export SBX_RUNTIME_DIR=~/.sbx-run"
	fi, err := os.Lstat(base)
	exists := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		r.Status, r.Detail, r.Fix = Fail, err.Error(), private
		return r
	case fi.Mode()&fs.ModeSymlink != 0:
		r.Status = Fail
		r.Detail = base + " is a symbolic link; sbx keeps sockets only in a real directory of its user's"
		r.Fix = "rm " + shellQuote(base) + " (the link, not what it leads to)"
		return r
	case !fi.IsDir():
		r.Status = Fail
		r.Detail = base + " is not a directory"
		r.Fix = "move " + shellQuote(base) + " away, or: " + private
		return r
	case owner(fi) != os.Geteuid():
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s is owned by uid %d, not by you (uid %d); sbx refuses it", base, owner(fi), os.Geteuid())
		r.Fix = private
		return r
	case fi.Mode().Perm()&0o077 != 0 || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
		r.Status = Warn
		r.Detail = fmt.Sprintf("%s has mode %04o, not 0700: other users may reach into it (sbx makes it 0700 when it next uses it)", base, fi.Mode().Perm())
		r.Fix = "chmod 700 " + shellQuote(base)
		return r
	}

	names := []string{strings.Repeat("x", runtimeNameRoom)}
	if opts.Config != nil && len(opts.Config.Sandboxes) > 0 {
		names = slices.Sorted(maps.Keys(opts.Config.Sandboxes))
	}
	var tooLong []string
	var lenErr error
	for _, n := range names {
		_, err := supervisor.SandboxDir(base, probeConfigDir, n)
		var unsafe *supervisor.UnsafeError
		switch {
		case errors.As(err, &unsafe):
			r.Status = Fail
			r.Detail = fmt.Sprintf("%s %s; sbx refuses the runtime directory %s", unsafe.Path, unsafe.Problem, base)
			r.Fix = private
			return r
		case err != nil:
			tooLong, lenErr = append(tooLong, n), err
		}
	}
	if len(tooLong) > 0 {
		r.Status = Fail
		r.Detail = strings.TrimPrefix(lenErr.Error(), "supervisor: ")
		if opts.Config != nil && len(opts.Config.Sandboxes) > 0 {
			r.Detail = fmt.Sprintf("%s is too long for the unix socket paths of sandbox(es) %s", base, strings.Join(tooLong, ", "))
		}
		r.Fix = "export SBX_RUNTIME_DIR=/tmp/sbx-" + strconv.Itoa(os.Getuid()) + " (or another short path)"
		return r
	}
	r.Status = OK
	if exists {
		r.Detail = base + ": yours, mode 0700"
	} else {
		r.Detail = base + " does not exist yet (sbx makes it, mode 0700); the directories above it are safe"
	}
	r.Detail += "; socket paths fit"
	return r
}

// checkCacheDir checks the build cache's root ($SBX_CACHE_DIR, else
// builders/cache's default): that this user may write it, that no one
// else may, and that its file system has MinFree free.
func checkCacheDir(opts *Options) Result {
	r := Result{Name: "cache-dir"}
	root := opts.getenv(cache.EnvRoot)
	if root == "" {
		d, err := cache.DefaultRoot()
		if err != nil {
			r.Status, r.Detail = Fail, err.Error()
			r.Fix = "export " + cache.EnvRoot + "=DIR (a directory of yours with a few GiB free)"
			return r
		}
		root = d
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	elsewhere := "export " + cache.EnvRoot + "=DIR (a directory of yours with a few GiB free)"
	fi, err := os.Stat(root)
	at := root // where free space and writability are measured
	exists := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
		at = existingAncestor(root)
	case err != nil:
		r.Status, r.Detail, r.Fix = Fail, err.Error(), elsewhere
		return r
	case !fi.IsDir():
		r.Status = Fail
		r.Detail = root + " is not a directory"
		r.Fix = "move " + shellQuote(root) + " away, or: " + elsewhere
		return r
	}
	if !writable(at) {
		r.Status = Fail
		if exists {
			r.Detail = fmt.Sprintf("%s is not writable for you (owner uid %d, mode %04o)", root, owner(fi), fi.Mode().Perm())
			r.Fix = "sudo chown -R $(id -u) " + shellQuote(root) + ", or: " + elsewhere
		} else {
			r.Detail = fmt.Sprintf("%s does not exist and %s, where sbx would make it, is not writable for you", root, at)
			r.Fix = elsewhere
		}
		return r
	}
	var warns []string
	var fixes []string
	if exists {
		if uid := owner(fi); uid != os.Geteuid() {
			warns = append(warns, fmt.Sprintf("it is owned by uid %d, not by you (uid %d), who can change what your builds read", uid, os.Geteuid()))
			fixes = append(fixes, "sudo chown -R $(id -u) "+shellQuote(root))
		}
		if fi.Mode().Perm()&0o022 != 0 {
			warns = append(warns, fmt.Sprintf("mode %04o lets other users write to it, and so change what your builds read", fi.Mode().Perm()))
			fixes = append(fixes, "chmod go-w "+shellQuote(root))
		}
	}
	minFree := opts.MinFree
	if minFree == 0 {
		minFree = DefaultMinFree
	}
	free, freeErr := freeBytes(at)
	switch {
	case freeErr != nil:
		warns = append(warns, "cannot tell its free space: "+freeErr.Error())
	case free < minFree:
		warns = append(warns, fmt.Sprintf("only %s free on its file system, under the %s a few image builds need", gib(free), gib(minFree)))
		fixes = append(fixes, "free space there, or "+elsewhere+" on a larger file system")
	}
	detail := root
	if !exists {
		detail += " does not exist yet (sbx build makes it)"
	}
	if len(warns) > 0 {
		r.Status = Warn
		r.Detail = detail + ": " + strings.Join(warns, "; ")
		r.Fix = strings.Join(fixes, "; ")
		return r
	}
	r.Status = OK
	if exists {
		detail += ": yours, writable"
	}
	r.Detail = detail + "; " + gib(free) + " free"
	return r
}

// existingAncestor returns the nearest directory above path that exists.
func existingAncestor(path string) string {
	for {
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

func gib(n uint64) string {
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
