package aptkernel

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Package is the versioned kernel package the meta package
// linux-image-amd64 depends on, with its version, as apt-cache shows it.
func Package() (pkg, version string, err error) {
	out, err := exec.Command("apt-cache", "show", "--no-all-versions", "linux-image-amd64").Output()
	if err != nil {
		return "", "", fmt.Errorf("apt-cache show linux-image-amd64: %w", err)
	}
	return fromShow(string(out))
}

// fromShow finds the first "linux-image-NAME (= VERSION)" dependency in
// the output of apt-cache show.
func fromShow(out string) (pkg, version string, err error) {
	for _, line := range strings.Split(out, "\n") {
		deps, ok := strings.CutPrefix(line, "Depends:")
		if !ok {
			continue
		}
		for _, d := range strings.Split(deps, ",") {
			name, rest, _ := strings.Cut(strings.TrimSpace(d), " ")
			if strings.HasPrefix(name, "linux-image-") && strings.HasPrefix(rest, "(= ") {
				return name, strings.TrimSuffix(strings.TrimPrefix(rest, "(= "), ")"), nil
			}
		}
	}
	return "", "", errors.New("linux-image-amd64 depends on no versioned kernel package")
}
