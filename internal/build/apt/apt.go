package apt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Downloader fetches one Debian package into dir and returns the path
// of the .deb it wrote. name may carry an architecture qualifier
// ("busybox-static:arm64"). Implementations use the machine's own apt
// sources: no mirror is ever named by sbx.
type Downloader interface {
	Download(ctx context.Context, name, version, dir string) (path string, err error)
}

// Lister is implemented by a Downloader that can also say which
// versions of a package apt offers. A deb source that names no exact
// version needs it.
type Lister interface {
	// Versions returns the version of name (which may carry an
	// architecture qualifier) that apt would install, its candidate, ""
	// when there is none, and every version apt's sources offer for
	// download, in apt's order (newest first). A package apt does not
	// know has neither.
	Versions(ctx context.Context, name string) (candidate string, available []string, err error)
}

// Get downloads packages with `apt-get download NAME=VERSION`, which
// needs no root and verifies the package against the signed apt indexes,
// and lists versions with `apt-cache policy NAME`.
type Get struct {
	// Environ is the environment of apt-get; nil means the process's own.
	Environ []string
}

var (
	_ Downloader = (*Get)(nil)
	_ Lister     = (*Get)(nil)
)

// Download runs apt-get download in dir and returns the one .deb it
// wrote. An empty version downloads apt's candidate.
func (a *Get) Download(ctx context.Context, name, version, dir string) (string, error) {
	spec := name
	if version != "" {
		spec += "=" + version
	}
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", "-o", "Debug::NoLocking=1", spec)
	cmd.Dir = dir
	cmd.Env = a.Environ
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("deb: sources are downloaded with the host's apt-get, which is not on PATH: run sbx lock and build for images with deb: sources on a Debian or Ubuntu host (%w)", err)
		}
		msg := lastLines(out.String(), 5)
		if strings.Contains(name, ":") && strings.Contains(msg, "Unable to locate") {
			msg += " (a foreign architecture must first be added with dpkg --add-architecture and apt-get update)"
		}
		return "", fmt.Errorf("apt-get download %s: %v: %s", spec, err, msg)
	}
	debs, err := filepath.Glob(filepath.Join(dir, "*.deb"))
	if err != nil {
		return "", err
	}
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s wrote %d .deb files, want 1", spec, len(debs))
	}
	return debs[0], nil
}

// Versions runs `apt-cache policy NAME` (in the C locale, so that its
// output can be read) and reads its candidate and version table.
func (a *Get) Versions(ctx context.Context, name string) (string, []string, error) {
	env := a.Environ
	if env == nil {
		env = os.Environ()
	}
	cmd := exec.CommandContext(ctx, "apt-cache", "policy", name)
	cmd.Env = append(env[:len(env):len(env)], "LC_ALL=C")
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", nil, fmt.Errorf("deb: sources without an exact version are resolved with the host's apt-cache, which is not on PATH: run sbx lock for images with deb: sources on a Debian or Ubuntu host (%w)", err)
		}
		return "", nil, fmt.Errorf("apt-cache policy %s: %v: %s", name, err, lastLines(errOut.String(), 5))
	}
	candidate, available := parsePolicy(out.String())
	return candidate, available, nil
}

// parsePolicy reads the output of `apt-cache policy NAME` for one
// package: the Candidate line, and the versions of the version table that
// some source offers for download (not only the dpkg status file, which
// lists what is installed). The table looks like
//
//	 Version table:
//	*** 20250419~deb12u2 500
//	       500 https://mirror bookworm-security/main amd64 Packages
//	       100 /var/lib/dpkg/status
//	    20230311+deb12u1 500
//	       500 https://mirror bookworm/main amd64 Packages
func parsePolicy(out string) (candidate string, available []string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	inTable := false
	current := "" // the version whose sources are being read
	seen := map[string]bool{}
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "Candidate:"):
			candidate = strings.TrimSpace(strings.TrimPrefix(trimmed, "Candidate:"))
			if candidate == "(none)" {
				candidate = ""
			}
		case trimmed == "Version table:":
			inTable = true
		case !inTable:
		case strings.HasPrefix(line, " *** ") || strings.HasPrefix(line, "     ") && !strings.HasPrefix(line, "      "):
			// A version line: the version and its priority.
			fields := strings.Fields(strings.TrimPrefix(line, " *** "))
			current = ""
			if len(fields) == 2 {
				current = fields[0]
			}
		case current != "":
			// A source line: the priority and where the version comes
			// from; a path is the dpkg status file, a URL an apt source.
			fields := strings.Fields(trimmed)
			if len(fields) >= 2 && !strings.HasPrefix(fields[1], "/") && !seen[current] {
				seen[current] = true
				available = append(available, current)
			}
		}
	}
	return candidate, available
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}
