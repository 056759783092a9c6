package hostenv

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

func TestLookup(t *testing.T) {
	env := []string{"A=1", "B=", "A=2", "C", "D=x=y", "=E"}
	for _, tc := range []struct {
		name string
		want string
		ok   bool
	}{
		{"A", "2", true}, // the last entry wins
		{"B", "", true},  // set, empty
		{"C", "", false}, // a bare name sets nothing
		{"D", "x=y", true},
		{"E", "", false},
		{"", "E", true},
		{"Z", "", false},
		{"A=1", "", false}, // a name holds no "="
	} {
		v, ok := Lookup(env, tc.name)
		if v != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.name, v, ok, tc.want, tc.ok)
		}
		if g := Get(env, tc.name); g != tc.want {
			t.Errorf("Get(%q) = %q; want %q", tc.name, g, tc.want)
		}
	}
	if _, ok := Lookup(nil, "A"); ok {
		t.Error("Lookup in no environment found A")
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		kv, name, value string
		ok              bool
	}{
		{"A=1", "A", "1", true},
		{"A==1", "A", "=1", true},
		{"A", "A", "", false},
		{"=1", "", "1", true},
		{"", "", "", false},
	} {
		n, v, ok := Split(tc.kv)
		if n != tc.name || v != tc.value || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %q, %v", tc.kv, n, v, ok)
		}
		if Name(tc.kv) != tc.name {
			t.Errorf("Name(%q) = %q; want %q", tc.kv, Name(tc.kv), tc.name)
		}
	}
}

func TestMapParse(t *testing.T) {
	got := Map([]string{"A=1", "B", "=x", "A=2", "C=a=b"})
	want := map[string]string{"A": "2", "C": "a=b"}
	if !maps.Equal(got, want) {
		t.Errorf("Map = %v; want %v", got, want)
	}
	if m, err := Parse([]string{"A=1", "B=", "A=3"}); err != nil || !maps.Equal(m, map[string]string{"A": "3", "B": ""}) {
		t.Errorf("Parse = %v, %v", m, err)
	}
	for _, bad := range []string{"NOEQUALS", "=value", ""} {
		_, err := Parse([]string{"A=1", bad, "C"})
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Entry != bad {
			t.Errorf("Parse with %q = %v; want an EntryError naming it", bad, err)
		}
	}
	if _, err := Parse([]string{"NOEQUALS"}); err == nil || err.Error() != `"NOEQUALS": write KEY=VALUE` {
		t.Errorf("Parse error %v", err)
	}
}

func TestMerge(t *testing.T) {
	in := []string{"PATH=/bin", "HOME=/root", "TERM", "PATH=/usr/bin", "X=1", "TERM=xterm", "HOME=/home/u"}
	want := []string{"PATH=/usr/bin", "X=1", "TERM=xterm", "HOME=/home/u"}
	orig := slices.Clone(in)
	if got := Merge(in); !slices.Equal(got, want) {
		t.Errorf("Merge = %q; want %q", got, want)
	}
	if !slices.Equal(in, orig) {
		t.Errorf("Merge changed its input: %q", in)
	}
	if got := Merge(nil); len(got) != 0 {
		t.Errorf("Merge(nil) = %q", got)
	}
}
