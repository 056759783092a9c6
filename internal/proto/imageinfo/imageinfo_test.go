package imageinfo

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	in := &Info{
		Version: Version, Name: "agent", Platform: "linux/amd64", InputHash: "sha256:00",
		Hostname: "agent", Env: map[string]string{"B": "2", "A": "1"},
		Users:   []User{{Name: "agent", UID: 501, GID: 501, Home: "/home/agent", Shell: "/bin/sh", Groups: []string{"wheel"}}},
		Network: DefaultNetwork(), CACert: CACertPath,
	}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if i, j := strings.Index(string(b), `"A"`), strings.Index(string(b), `"B"`); i < 0 || j < i {
		t.Errorf("env keys not sorted:\n%s", b)
	}
	out, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Errorf("round trip (-in +out):\n%s", d)
	}
}

func TestParseRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"version":  `{"version":2,"name":"x"}`,
		"unknown":  `{"version":1,"extra":true}`,
		"trailing": `{"version":1} {}`,
		"syntax":   `{"version":`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: Parse(%s) succeeded", name, doc)
		} else if !strings.Contains(err.Error(), Path) {
			t.Errorf("%s: error %q does not name %s", name, err, Path)
		}
	}
}
