package bootproto

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Paths inside the initramfs, relative to its root.
const (
	// InitPath is the agent binary, which the kernel runs as PID 1.
	InitPath = "init"
	// ModuleListPath is the module manifest (see WriteModuleList).
	ModuleListPath = "lib/sbx/modules.list"
	// SysrootDir is where the agent mounts the root disk before it
	// switches to it.
	SysrootDir = "sysroot"
	// ModulesDir holds the module files, under the kernel version:
	// lib/modules/VERSION/kernel/....
	ModulesDir = "lib/modules"
)

// Dirs are the directories the initramfs must hold for the agent to
// mount on: the kernel's file systems, scratch space and the root disk's
// mount point.
var Dirs = []string{"dev", "proc", "run", "sys", SysrootDir, "tmp"}

// Mode says what the agent does once the root file system is mounted.
type Mode string

// Modes the agent knows.
const (
	// ModeReadyPowerOff switches to the root disk, sets the host name,
	// prints the ready line and powers the machine off. It proves that
	// an image boots; it is the default.
	ModeReadyPowerOff Mode = "ready-poweroff"
	// ModeServe switches to the root disk, sets the host name, prints
	// the ready line and then serves the host on the agent port
	// (AgentPort) until the host asks for a power-off on the control
	// port (ControlPort). It is what sandboxes boot in.
	ModeServe Mode = "serve"
)

// Modes lists every Mode the agent knows, for messages.
var Modes = []Mode{ModeReadyPowerOff, ModeServe}

// Kernel command-line parameters the agent reads from /proc/cmdline. The
// kernel passes dotted parameters to no one, so the agent reads them
// itself; other parameters are the kernel's and are ignored.
const (
	ParamMode        = "sbx.mode"        // a Mode
	ParamRoot        = "sbx.root"        // the root disk's device, /dev/vda
	ParamRootFSType  = "sbx.rootfstype"  // its file system type, ext4
	ParamRootWait    = "sbx.rootwait"    // how long to wait for the disk, a Go duration
	ParamBootTimeout = "sbx.boottimeout" // how long the whole boot may take
	ParamHostname    = "sbx.hostname"    // overrides the root's /etc/hostname
)

// Defaults for what the command line does not say.
const (
	DefaultRoot        = "/dev/vda"
	DefaultRootFSType  = "ext4"
	DefaultRootWait    = 30 * time.Second
	DefaultBootTimeout = 120 * time.Second
	// DefaultHostname is used when neither the command line nor the
	// root's /etc/hostname names the machine.
	DefaultHostname = "sbx"
)

// Config is the agent's configuration, from the kernel command line.
type Config struct {
	Mode        Mode
	Root        string        // device path of the root disk
	RootFSType  string        // file system type passed to mount(2)
	RootWait    time.Duration // wait this long for Root to appear
	BootTimeout time.Duration // power off if not ready after this long
	// Hostname, when not empty, overrides the root's /etc/hostname.
	Hostname string
}

// DefaultConfig is the configuration of an empty command line.
func DefaultConfig() Config {
	return Config{
		Mode:        ModeReadyPowerOff,
		Root:        DefaultRoot,
		RootFSType:  DefaultRootFSType,
		RootWait:    DefaultRootWait,
		BootTimeout: DefaultBootTimeout,
	}
}

// ParseCmdline reads the agent's configuration from a kernel command
// line, as /proc/cmdline holds it. Parameters not starting with "sbx."
// belong to the kernel and are skipped; an unknown "sbx." parameter or a
// bad value is an error naming it. Later parameters override earlier
// ones, as for the kernel.
func ParseCmdline(cmdline string) (Config, error) {
	c := DefaultConfig()
	for _, arg := range SplitCmdline(cmdline) {
		key, value, hasValue := strings.Cut(arg, "=")
		if !strings.HasPrefix(key, "sbx.") {
			continue
		}
		if !hasValue {
			return c, fmt.Errorf("kernel parameter %s has no value (write %s=VALUE)", key, key)
		}
		var err error
		switch key {
		case ParamMode:
			if !slices.Contains(Modes, Mode(value)) {
				err = fmt.Errorf("unknown mode %q (known: %s)", value, modeList())
			}
			c.Mode = Mode(value)
		case ParamRoot:
			if !strings.HasPrefix(value, "/dev/") || strings.Contains(value[len("/dev/"):], "..") || len(value) == len("/dev/") {
				err = fmt.Errorf("%q is not a device path under /dev/", value)
			}
			c.Root = value
		case ParamRootFSType:
			if value == "" || strings.ContainsAny(value, "/ ") {
				err = fmt.Errorf("%q is not a file system type", value)
			}
			c.RootFSType = value
		case ParamRootWait:
			c.RootWait, err = parseTimeout(value)
		case ParamBootTimeout:
			c.BootTimeout, err = parseTimeout(value)
		case ParamHostname:
			err = CheckHostname(value)
			c.Hostname = value
		default:
			err = fmt.Errorf("unknown parameter (known: %s)", strings.Join(paramNames(), ", "))
		}
		if err != nil {
			return c, fmt.Errorf("kernel parameter %s: %w", key, err)
		}
	}
	return c, nil
}

func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

func modeList() string {
	var s []string
	for _, m := range Modes {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}

func paramNames() []string {
	return []string{ParamBootTimeout, ParamHostname, ParamMode, ParamRoot, ParamRootFSType, ParamRootWait}
}

// Params renders c as kernel parameters, for the host to append to the
// command line. Values equal to the default are left out, so a default
// configuration adds nothing; ParseCmdline of the result gives c back.
func (c Config) Params() []string {
	d := DefaultConfig()
	var out []string
	add := func(key, value, def string) {
		if value != def {
			out = append(out, key+"="+quoteParam(value))
		}
	}
	add(ParamMode, string(c.Mode), string(d.Mode))
	add(ParamRoot, c.Root, d.Root)
	add(ParamRootFSType, c.RootFSType, d.RootFSType)
	if c.RootWait != d.RootWait {
		add(ParamRootWait, c.RootWait.String(), "")
	}
	if c.BootTimeout != d.BootTimeout {
		add(ParamBootTimeout, c.BootTimeout.String(), "")
	}
	add(ParamHostname, c.Hostname, "")
	return out
}

func quoteParam(v string) string {
	if strings.ContainsAny(v, " \t\n") {
		return `"` + v + `"`
	}
	return v
}

// SplitCmdline splits a kernel command line into parameters the way the
// kernel does: on white space, except inside double quotes, which are
// removed ("a=\"b c\"" is one parameter a=b c). A "--" ends the kernel's
// parameters; what follows belongs to init and is not returned.
func SplitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, inArg := false, false
	flush := func() {
		if inArg {
			out = append(out, cur.String())
		}
		cur.Reset()
		inArg = false
	}
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			inArg = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			if inArg && cur.String() == "--" {
				return out
			}
			flush()
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inArg && cur.String() == "--" {
		return out
	}
	flush()
	return out
}

// CheckHostname reports whether name is a valid host name: 1 to 64
// letters, digits, hyphens and dots, not starting or ending with a
// hyphen or dot.
func CheckHostname(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("host name %q must be 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("host name %q has %q; only letters, digits, '-' and '.' are allowed", name, r)
		}
	}
	if strings.HasPrefix(name, "-") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, "-") || strings.HasSuffix(name, ".") {
		return fmt.Errorf("host name %q must not start or end with '-' or '.'", name)
	}
	return nil
}
