package policy

import (
	"fmt"
	"strings"
)

// CheckSecretSource checks the syntax of a source a secret's value is
// read from on the host: env:NAME, file:PATH or command:COMMAND. The
// value itself is never read here (package secretsrc reads it).
func CheckSecretSource(s string) error {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("source %q must be env:NAME, file:PATH or command:COMMAND", s)
	}
	switch kind {
	case "env":
		if !isEnvName(rest) {
			return fmt.Errorf("source %q: %q is not an environment variable name", s, rest)
		}
	case "file":
		if rest == "" {
			return fmt.Errorf("source %q names no file", s)
		}
	case "command":
		if strings.TrimSpace(rest) == "" {
			return fmt.Errorf("source %q names no command", s)
		}
	default:
		return fmt.Errorf("source %q: unknown kind %q; use env:NAME, file:PATH or command:COMMAND", s, kind)
	}
	return nil
}

// isEnvName reports whether s is a portable environment variable name:
// letters, digits and underscores, not starting with a digit.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
