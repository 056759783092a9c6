package qemu

// InstallCommand is the command that installs QEMU's system emulators
// and qemu-img on a host running goos ("linux", "darwin"), or "" when sbx
// knows none. On Linux it names the Debian/Ubuntu and the Fedora
// commands, since the distribution is not known.
func InstallCommand(goos string) string {
	switch goos {
	case "linux":
		return "apt-get install qemu-system-x86 qemu-utils (Debian, Ubuntu) or dnf install qemu-kvm qemu-img (Fedora)"
	case "darwin":
		return "brew install qemu"
	}
	return ""
}
