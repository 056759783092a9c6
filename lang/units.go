package lang

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size units accepted by ParseSize. Only the binary (IEC) units are
// accepted: "GB" and "G" are rejected rather than guessed at, because
// disk and memory tools disagree on whether they mean 10^9 or 2^30.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{
	{"TiB", 40},
	{"GiB", 30},
	{"MiB", 20},
	{"KiB", 10},
	{"B", 0},
}

// ParseSize parses a size such as "4GiB", "512MiB", "64 KiB" or a plain
// byte count ("1048576", "4096B"). The units are the binary ones: KiB, MiB,
// GiB and TiB (powers of 1024). Decimal or abbreviated units ("4GB", "4G",
// "4gb") are rejected as ambiguous; so are fractions, signs and values
// that do not fit in an int64.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size; write a size such as \"4GiB\"")
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	num, unit := t[:i], strings.TrimLeft(t[i:], " ")
	if num == "" {
		return 0, fmt.Errorf("size %q must start with a whole number of bytes or units, as in \"4GiB\"", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if unit == "" {
		return n, nil
	}
	for _, u := range sizeUnits {
		if unit != u.suffix {
			continue
		}
		if n > math.MaxInt64>>u.shift {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n << u.shift, nil
	}
	if strings.HasPrefix(unit, ".") {
		return 0, fmt.Errorf("size %q is not a whole number; use a smaller unit, as in \"1536MiB\"", s)
	}
	switch strings.ToUpper(unit) {
	case "K", "KB", "M", "MB", "G", "GB", "T", "TB", "KIB", "MIB", "GIB", "TIB":
		want := strings.ToUpper(unit[:1]) + "iB"
		return 0, fmt.Errorf("size %q has the ambiguous unit %q; write %q for powers of 1024", s, unit, num+want)
	}
	return 0, fmt.Errorf("size %q has an unknown unit %q; use B, KiB, MiB, GiB or TiB", s, unit)
}

// FormatSize renders n bytes in the largest IEC unit that divides it
// exactly, the inverse of ParseSize: 4294967296 is "4GiB".
func FormatSize(n int64) string {
	if n > 0 {
		for _, u := range sizeUnits {
			if u.shift > 0 && n%(1<<u.shift) == 0 {
				return strconv.FormatInt(n>>u.shift, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseMode parses a file mode written as an octal string: "0755", "755",
// "4755" or "0o755". Permission bits plus setuid, setgid and sticky are
// allowed (at most 07777); anything that is not octal is an error.
func ParseMode(s string) (uint32, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	if t == "" {
		return 0, fmt.Errorf("empty file mode; write an octal mode such as \"0644\"")
	}
	for _, c := range t {
		if c < '0' || c > '7' {
			return 0, fmt.Errorf("file mode %q is not octal; write it as a string of digits 0-7, such as \"0755\"", s)
		}
	}
	n, err := strconv.ParseUint(t, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("file mode %q is larger than 07777 (permission, setuid, setgid and sticky bits)", s)
	}
	return uint32(n), nil
}
