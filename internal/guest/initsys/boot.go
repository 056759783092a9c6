package initsys

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// Boot runs the boot steps under a root directory with a set of system
// calls. Its methods are meant to be called in the order they are
// declared; package guest does that.
type Boot struct {
	// Root is the directory the guest's paths are relative to: "/" in
	// the guest, a temporary directory in tests. After SwitchRoot it
	// names the new root.
	Root string
	// Sys makes the system calls.
	Sys Sys
	// Console receives warning lines. Nil discards them.
	Console io.Writer
	// Poll is how often waits look again; 0 means 20ms.
	Poll time.Duration

	failedModules []string // "name: error", for the root-disk message
	rootMounted   bool
	switched      bool
}

// kernelMount is one file system the kernel provides.
type kernelMount struct {
	source, target, fstype, data string
	flags                        MountFlags
}

// kernelMounts are mounted first and moved into the new root.
var kernelMounts = []kernelMount{
	{"proc", "/proc", "proc", "", NoSuid | NoDev | NoExec},
	{"sysfs", "/sys", "sysfs", "", NoSuid | NoDev | NoExec},
	{"devtmpfs", "/dev", "devtmpfs", "mode=0755", NoSuid},
	{"tmpfs", "/run", "tmpfs", "mode=0755", NoSuid | NoDev},
}

func (b *Boot) path(p string) string { return filepath.Join(b.Root, filepath.FromSlash(p)) }

func (b *Boot) poll() time.Duration {
	if b.Poll > 0 {
		return b.Poll
	}
	return 20 * time.Millisecond
}

func (b *Boot) warn(format string, args ...any) {
	if b.Console != nil {
		io.WriteString(b.Console, bootproto.WarningLine(fmt.Sprintf(format, args...)))
	}
}

// MountKernelFS mounts /proc, /sys, /dev (devtmpfs) and /run (tmpfs),
// creating the mount points when missing. A file system already mounted
// there (EBUSY) is left as it is.
func (b *Boot) MountKernelFS() error {
	for _, m := range kernelMounts {
		target := b.path(m.target)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("creating mount point %s: %w", m.target, err)
		}
		err := b.Sys.Mount(m.source, target, m.fstype, m.data, m.flags)
		if err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("mounting %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// ReadConfig reads the agent's configuration from /proc/cmdline.
func (b *Boot) ReadConfig() (bootproto.Config, error) {
	data, err := os.ReadFile(b.path("/proc/cmdline"))
	if err != nil {
		return bootproto.DefaultConfig(), fmt.Errorf("reading the kernel command line: %w", err)
	}
	c, err := bootproto.ParseCmdline(string(data))
	if err != nil {
		return c, fmt.Errorf("/proc/cmdline: %w", err)
	}
	return c, nil
}

// LoadModules loads the modules the manifest (bootproto.ModuleListPath)
// lists, in order, and returns how many it loaded. A module already
// loaded counts as loaded. A module that fails to load is reported on
// the console and skipped: hardware the machine lacks makes some
// drivers refuse, and a module the boot needs shows up as a missing
// root disk, whose error names the failed modules. A missing manifest
// means a kernel with everything built in. A manifest that does not
// parse, or names a missing file, is an error.
func (b *Boot) LoadModules() (int, error) {
	manifest := "/" + bootproto.ModuleListPath
	f, err := os.Open(b.path(manifest))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	mods, err := bootproto.ParseModuleList(f, manifest)
	f.Close()
	if err != nil {
		return 0, err
	}
	loaded := 0
	for _, m := range mods {
		mf, err := os.Open(b.path("/" + m.File))
		if err != nil {
			return loaded, fmt.Errorf("%s lists module %s: %w", manifest, m.Name, err)
		}
		err = b.Sys.LoadModule(mf, "")
		mf.Close()
		switch {
		case err == nil, errors.Is(err, fs.ErrExist):
			loaded++
		default:
			b.failedModules = append(b.failedModules, m.Name+": "+err.Error())
			b.warn("loading module %s (/%s): %v", m.Name, m.File, err)
		}
	}
	return loaded, nil
}

// WaitDevice waits until dev ("/dev/vda") exists both in sysfs and as a
// device node, for at most timeout or until ctx ends. Its error lists
// the block devices there are and the modules that failed to load.
func (b *Boot) WaitDevice(ctx context.Context, dev string, timeout time.Duration) error {
	name := strings.TrimPrefix(dev, "/dev/")
	sysPath := b.path("/sys/class/block/" + name)
	devPath := b.path(dev)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(b.poll())
	defer t.Stop()
	for {
		if exists(sysPath) && exists(devPath) {
			return nil
		}
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		}
		// One last look: the device may have come with the deadline.
		if exists(sysPath) && exists(devPath) {
			return nil
		}
		msg := fmt.Sprintf("root disk %s did not appear within %v", dev, timeout)
		if ctx.Err() == context.Canceled {
			msg = fmt.Sprintf("stopped waiting for root disk %s", dev)
		}
		devs := b.blockDevices()
		if len(devs) == 0 {
			msg += " (there are no block devices"
		} else {
			msg += " (block devices: " + strings.Join(devs, ", ")
		}
		if len(b.failedModules) > 0 {
			msg += "; modules that failed to load: " + strings.Join(b.failedModules, "; ")
		}
		return errors.New(msg + ")")
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (b *Boot) blockDevices() []string {
	entries, err := os.ReadDir(b.path("/sys/class/block"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// ext4 (and ext2/ext3) superblocks start 1024 bytes in; their magic
// number is 56 bytes into the superblock.
const (
	extMagicOffset = 1024 + 56
	extMagic       = 0xEF53
)

// CheckFS checks that dev holds a file system of type fstype before it
// is mounted, for a clearer error than mount's "invalid argument". It
// knows ext2, ext3 and ext4, and accepts other types unchecked.
func (b *Boot) CheckFS(dev, fstype string) error {
	switch fstype {
	case "ext2", "ext3", "ext4":
	default:
		return nil
	}
	f, err := os.Open(b.path(dev))
	if err != nil {
		return fmt.Errorf("opening root disk: %w", err)
	}
	defer f.Close()
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], extMagicOffset); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("root disk %s is too small to hold an %s file system", dev, fstype)
		}
		return fmt.Errorf("reading root disk %s: %w", dev, err)
	}
	if got := binary.LittleEndian.Uint16(magic[:]); got != extMagic {
		return fmt.Errorf("root disk %s is not an %s file system: no ext superblock magic at byte %d (found 0x%04x, want 0x%04x)",
			dev, fstype, extMagicOffset, got, extMagic)
	}
	return nil
}

// MountRoot mounts the root disk at /sysroot, read-write.
func (b *Boot) MountRoot(c bootproto.Config) error {
	target := b.path("/" + bootproto.SysrootDir)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("creating /%s: %w", bootproto.SysrootDir, err)
	}
	if err := b.Sys.Mount(c.Root, target, c.RootFSType, "", 0); err != nil {
		return fmt.Errorf("mounting root disk %s (%s) at /%s: %w", c.Root, c.RootFSType, bootproto.SysrootDir, err)
	}
	b.rootMounted = true
	return nil
}

// Hostname returns the host name to set: the command line's, else the
// first line of the root's /etc/hostname, else bootproto.DefaultHostname.
// It is called after MountRoot and before SwitchRoot. An /etc/hostname
// that is not a valid host name is reported on the console and ignored.
func (b *Boot) Hostname(c bootproto.Config) string {
	if c.Hostname != "" {
		return c.Hostname
	}
	file := b.path("/" + bootproto.SysrootDir + "/etc/hostname")
	data, err := os.ReadFile(file)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.warn("reading /etc/hostname of the root disk: %v", err)
		}
		return bootproto.DefaultHostname
	}
	name, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	name = strings.TrimSpace(name)
	if err := bootproto.CheckHostname(name); err != nil {
		b.warn("/etc/hostname of the root disk: %v; using %q", err, bootproto.DefaultHostname)
		return bootproto.DefaultHostname
	}
	return name
}

// SwitchRoot moves /proc, /sys, /dev and /run into the mounted root disk
// (creating their mount points there when missing) and makes it the
// root. The initramfs stays in memory, hidden under the new root; the
// running agent keeps its binary from it.
func (b *Boot) SwitchRoot() error {
	newRoot := b.path("/" + bootproto.SysrootDir)
	for _, m := range kernelMounts {
		target := filepath.Join(newRoot, filepath.FromSlash(m.target))
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("the root disk has no %s to move %s to: %w", m.target, m.target, err)
		}
		if err := b.Sys.Mount(b.path(m.target), target, "", "", Move); err != nil {
			return fmt.Errorf("moving %s into the root disk: %w", m.target, err)
		}
	}
	if err := b.Sys.SwitchRoot(newRoot); err != nil {
		return fmt.Errorf("switching to the root disk: %w", err)
	}
	b.switched = true
	return nil
}

// SetHostname sets the kernel's host name.
func (b *Boot) SetHostname(name string) error {
	if err := b.Sys.Sethostname(name); err != nil {
		return fmt.Errorf("setting host name %q: %w", name, err)
	}
	return nil
}

// KernelRelease returns the running kernel's release, from
// /proc/sys/kernel/osrelease.
func (b *Boot) KernelRelease() (string, error) {
	data, err := os.ReadFile(b.path("/proc/sys/kernel/osrelease"))
	if err != nil {
		return "", fmt.Errorf("reading the kernel release: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// Uptime returns the time since the kernel started, from /proc/uptime.
func (b *Boot) Uptime() (time.Duration, error) {
	data, err := os.ReadFile(b.path("/proc/uptime"))
	if err != nil {
		return 0, fmt.Errorf("reading the uptime: %w", err)
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, fmt.Errorf("/proc/uptime is empty")
	}
	secs, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || secs < 0 {
		return 0, fmt.Errorf("/proc/uptime: %q is not a number of seconds", fields[0])
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// PowerOff flushes and detaches the root disk and turns the machine off:
// after SwitchRoot it remounts / read-only, before it unmounts /sysroot
// when mounted. Problems on the way are reported on the console; only a
// failed power-off is returned.
func (b *Boot) PowerOff() error {
	b.Sys.Sync()
	switch {
	case b.switched:
		if err := b.Sys.Mount("", b.path("/"), "", "", Remount|ReadOnly); err != nil {
			b.warn("remounting / read-only: %v", err)
		}
	case b.rootMounted:
		if err := b.Sys.Unmount(b.path("/"+bootproto.SysrootDir), false); err != nil {
			b.warn("unmounting /%s: %v", bootproto.SysrootDir, err)
		}
	}
	b.Sys.Sync()
	if err := b.Sys.PowerOff(); err != nil {
		return fmt.Errorf("powering off: %w", err)
	}
	return nil
}
