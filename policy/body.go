package policy

import (
	"fmt"
	"strings"
)

// CheckBodyHost checks the host of a body field: an exact host name (no
// wildcard) that one of the secret's hosts covers.
func CheckBodyHost(s string, hosts []HostPattern) error {
	p, err := ParseHostPattern(s)
	if err != nil {
		return err
	}
	if p.Wildcard {
		return fmt.Errorf("%q is a wildcard; a body field is substituted for one exact host", s)
	}
	for _, h := range hosts {
		if h.Match(p.Suffix) {
			return nil
		}
	}
	var names []string
	for _, h := range hosts {
		names = append(names, h.String())
	}
	return fmt.Errorf("%q is not one of the secret's hosts (%s); a secret is substituted only in requests to them", s, strings.Join(names, ", "))
}

// CheckBodyPath checks the path of a body field: an exact request path,
// starting with "/", of letters, digits and "-._~/:@" only (so that the
// path a request carries on the wire is compared, with no escaping that
// could make two spellings of it), with no empty, "." or ".." segment.
func CheckBodyPath(s string) error {
	if !strings.HasPrefix(s, "/") {
		return fmt.Errorf("%q does not start with /; name the request path exactly", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~/:@", c)) {
			return fmt.Errorf("%q: a body field's path holds letters, digits and -._~/:@ only (no pattern, query or escape); it is compared exactly", s)
		}
	}
	if s == "/" {
		return nil
	}
	for _, seg := range strings.Split(s[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%q has an empty, \".\" or \"..\" segment", s)
		}
	}
	return nil
}

// CheckFormField checks the name of a form field a secret goes in.
func CheckFormField(s string) error {
	if s == "" {
		return fmt.Errorf("the field name is empty")
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c == '.' || c == '[' || c == ']' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("%q: a form field name holds letters, digits and _-.[] only", s)
		}
	}
	return nil
}
