package state

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse feeds arbitrary bytes to the state file reader. A state file
// may come from an untrusted checkout, so parsing must never panic, and
// whatever it accepts must round-trip: Marshal renders it, the rendering
// parses back to an equal state, and rendering that again gives the same
// bytes.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	s := sample()
	s.Lineage = "6f1c2a9e-3b5d-4e8f-9a7b-0c1d2e3f4a5b"
	data, err := Marshal(s)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	lineage := `"lineage": "6f1c2a9e-3b5d-4e8f-9a7b-0c1d2e3f4a5b"`
	for _, seed := range []string{
		`{"format_version": 1, ` + lineage + `}`,
		`{"format_version": 1, ` + lineage + `, "serial": 3, "resources": []}`,
		`{"format_version": 1, ` + lineage + `, "resources": [{"address": "image.x", "image": {"platform": "linux/amd64"}}]}`,
		`{"format_version": 1, ` + lineage + `, "resources": [{"address": "sandbox.x", "sandbox": {"image": "x", "env": {}, "policy": {"allow": [{"pattern": "*.example.com"}], "mounts": [{"guest": "/w", "host": "."}]}, "runtime": {"dir": "/run/x", "pid": 1}}}]}`,
		`{"format_version": 2}`,
		`{`,
		`[]`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse(data, "state.json")
		if err != nil {
			return
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatalf("Marshal of an accepted state: %v\ninput: %q", err, data)
		}
		back, err := parse(out, "state.json")
		if err != nil {
			t.Fatalf("the rendering of an accepted state does not parse: %v\ninput: %q\nrendered: %s", err, data, out)
		}
		if diff := cmp.Diff(s, back, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("the state changed in a round trip (-read +reread):\n%s\ninput: %q", diff, data)
		}
		again, err := Marshal(back)
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("rendering is not stable: %v\nfirst:\n%s\nsecond:\n%s", err, out, again)
		}
	})
}
