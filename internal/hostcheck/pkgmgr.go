package hostcheck

import (
	"os"
	"runtime"
	"strings"
)

// PackageManager is the package manager a Fix installs with.
type PackageManager string

// The package managers fixes are written for; Unknown gets sentences.
const (
	Apt      PackageManager = "apt"  // Debian, Ubuntu and their derivatives
	DNF      PackageManager = "dnf"  // Fedora, RHEL and their derivatives
	Homebrew PackageManager = "brew" // macOS
	Unknown  PackageManager = ""
)

// Detect returns the package manager of this OS: from the ID and ID_LIKE
// of the os-release file at osRelease (empty means /etc/os-release) on
// Linux, Homebrew on macOS, else the first of apt-get, dnf and brew found
// in path (a PATH-style list).
func Detect(osRelease, path string) PackageManager {
	if runtime.GOOS == "darwin" {
		return Homebrew
	}
	if osRelease == "" {
		osRelease = "/etc/os-release"
	}
	if data, err := os.ReadFile(osRelease); err == nil {
		var ids []string
		for line := range strings.Lines(string(data)) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if ok && (k == "ID" || k == "ID_LIKE") {
				ids = append(ids, strings.Fields(strings.Trim(v, `"'`))...)
			}
		}
		for _, id := range ids {
			switch id {
			case "debian", "ubuntu":
				return Apt
			case "fedora", "rhel", "centos":
				return DNF
			}
		}
	}
	for _, pm := range []struct {
		bin string
		pm  PackageManager
	}{{"apt-get", Apt}, {"dnf", DNF}, {"brew", Homebrew}} {
		if _, ok := lookPath(pm.bin, path); ok {
			return pm.pm
		}
	}
	return Unknown
}

// packages names the package that provides a program, per package
// manager.
var packages = map[string]map[PackageManager]string{
	"qemu-amd64": {Apt: "qemu-system-x86", DNF: "qemu-system-x86-core", Homebrew: "qemu"},
	"qemu-arm64": {Apt: "qemu-system-arm", DNF: "qemu-system-aarch64-core", Homebrew: "qemu"},
	"npm":        {Apt: "npm", DNF: "nodejs-npm", Homebrew: "node"},
	"qemu-img":   {Apt: "qemu-utils", DNF: "qemu-img", Homebrew: "qemu"},
}

// install returns the command that installs what provides tool ("npm",
// "qemu-amd64") with pm, and whether there is one.
func (pm PackageManager) install(tool string) (string, bool) {
	pkg, ok := packages[tool][pm]
	if !ok {
		return "", false
	}
	switch pm {
	case Apt:
		return sudo() + "apt-get install " + pkg, true
	case DNF:
		return sudo() + "dnf install " + pkg, true
	case Homebrew:
		return "brew install " + pkg, true
	}
	return "", false
}

// upgrade returns the command that upgrades what provides tool.
func (pm PackageManager) upgrade(tool string) (string, bool) {
	pkg, ok := packages[tool][pm]
	if !ok {
		return "", false
	}
	switch pm {
	case Apt:
		return sudo() + "apt-get update && " + sudo() + "apt-get install --only-upgrade " + pkg, true
	case DNF:
		return sudo() + "dnf upgrade " + pkg, true
	case Homebrew:
		return "brew upgrade " + pkg, true
	}
	return "", false
}

// sudo is the prefix of a command that needs root, for a user who is
// not.
func sudo() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return "sudo "
}
