package hostenv

import (
	"fmt"
	"strings"
)

// Split splits an entry into its name and value; ok is false when it
// holds no "=" (a bare name).
func Split(kv string) (name, value string, ok bool) {
	return strings.Cut(kv, "=")
}

// Name returns an entry's name: what precedes its first "=", or the
// whole entry when it holds none.
func Name(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	return name
}

// Lookup returns the value of the variable name in environ and whether
// it is set; the last entry of name wins. A bare name does not set it.
func Lookup(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Get is Lookup's value, empty when name is not set.
func Get(environ []string, name string) string {
	v, _ := Lookup(environ, name)
	return v
}

// Map returns environ as a map from name to value, the last entry of a
// name winning. Entries without "=" or with an empty name are left out.
func Map(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// EntryError is an entry Parse refuses.
type EntryError struct {
	Entry string
}

func (e *EntryError) Error() string { return fmt.Sprintf("%q: write KEY=VALUE", e.Entry) }

// Parse checks that every entry of environ is KEY=VALUE with a non-empty
// KEY, as the -e flags must be, and returns them as Map does. The error
// is an *EntryError naming the first entry that is not.
func Parse(environ []string) (map[string]string, error) {
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, &EntryError{Entry: kv}
		}
	}
	return Map(environ), nil
}

// Merge returns environ with only the last entry of each name, each
// where that entry is: later entries override earlier ones as execve
// would, and the list says so once. A bare name counts as a name of its
// own. environ is not modified.
func Merge(environ []string) []string {
	last := make(map[string]int, len(environ))
	for i, kv := range environ {
		last[Name(kv)] = i
	}
	out := environ[:0:0]
	for i, kv := range environ {
		if last[Name(kv)] == i {
			out = append(out, kv)
		}
	}
	return out
}
