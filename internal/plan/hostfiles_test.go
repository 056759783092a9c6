package plan_test

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/policy"
)

// TestHostFileInputsWiden plays a change that bakes the user's SSH key
// into an image through a file: source: the plan must count it as
// widening, so that -fail-on-widen (Plan.Widens) refuses it.
func TestHostFileInputsWiden(t *testing.T) {
	before := map[string]string{"base": "alpine:3.23", "artifact.motd": "file:files/motd", "artifact.img": "oci-layout:./layout:v1"}
	for _, c := range []struct {
		name   string
		after  map[string]string
		prior  bool
		widen  []string // subjects
		narrow []string
	}{
		{"a key from outside the directory", map[string]string{"base": "alpine:3.23", "artifact.motd": "file:files/motd", "artifact.img": "oci-layout:./layout:v1", "artifact.key": "file:../../.ssh/id_rsa"}, true, []string{"artifact.key"}, nil},
		{"a file pointed elsewhere", map[string]string{"base": "alpine:3.23", "artifact.motd": "file:/etc/shadow", "artifact.img": "oci-layout:./layout:v1"}, true, []string{"artifact.motd"}, nil},
		{"a base from a local layout", map[string]string{"base": "oci-layout:/var/lib/img", "artifact.motd": "file:files/motd", "artifact.img": "oci-layout:./layout:v1"}, true, []string{"base"}, nil},
		{"a layout removed", map[string]string{"base": "alpine:3.23", "artifact.motd": "file:files/motd"}, true, nil, []string{"artifact.img"}},
		{"a new image with host files", before, false, []string{"artifact.img", "artifact.motd"}, nil},
		{"nothing local changes", map[string]string{"base": "alpine:3.24", "artifact.motd": "file:files/motd", "artifact.img": "oci-layout:./layout:v1"}, true, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var prior []*state.Resource
			if c.prior {
				prior = []*state.Resource{image("agent", hashA, before)}
			}
			p := plan.Compute([]*state.Resource{image("agent", hashB, c.after)}, prior)
			var widen, narrow []string
			for _, pc := range find(t, p, "image.agent").Policy {
				if pc.Kind != "image.input" || pc.Origin.Block != "image.agent" {
					t.Errorf("change %+v: want kind image.input from image.agent", pc)
				}
				switch pc.Direction {
				case policy.Widen:
					widen = append(widen, pc.Subject)
					if !strings.Contains(pc.Detail, strings.SplitN(c.after[pc.Subject], ":", 2)[1]) {
						t.Errorf("detail %q does not name the host path", pc.Detail)
					}
				case policy.Narrow:
					narrow = append(narrow, pc.Subject)
				}
			}
			if strings.Join(widen, ",") != strings.Join(c.widen, ",") || strings.Join(narrow, ",") != strings.Join(c.narrow, ",") {
				t.Errorf("widen %v narrow %v; want %v and %v", widen, narrow, c.widen, c.narrow)
			}
			if s := p.Summary(); s.Widen != len(c.widen) || p.Widens() != (len(c.widen) > 0) {
				t.Errorf("summary %+v, Widens %v; want %d widening", s, p.Widens(), len(c.widen))
			}
		})
	}
	// A destroyed image lists nothing.
	p := plan.Compute(nil, []*state.Resource{image("agent", hashA, before)})
	if p.Widens() || len(find(t, p, "image.agent").Policy) != 0 {
		t.Errorf("a destroyed image lists %v", find(t, p, "image.agent").Policy)
	}
}
