package recipe

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

func sampleSteps() []*lang.Provision {
	return []*lang.Provision{
		{
			Name: "tools", Run: []string{"/bin/sh", "-ec", "apk add git"}, Script: "apk add git",
			Env: map[string]string{"LANG": "C"}, Timeout: time.Minute,
			Egress: policy.Sandbox{
				Allow: []policy.AllowRule{{Pattern: policy.HostPattern{Suffix: "mirror.test"}, Origin: policy.Origin{Block: "image.agent.provision.tools", Line: 9}}},
				Hosts: []policy.HostMapping{{Name: "mirror.test", Addr: "127.0.0.1:8080"}},
			},
			DeclRange: hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 4}},
		},
		{Name: "after", Run: []string{"true"}, Timeout: time.Minute},
	}
}

// TestProvisionHash: every part of a step that decides what it does
// changes the hash, where it is written does not, and the steps are not
// part of the input hash (so the base disk's build key stays).
func TestProvisionHash(t *testing.T) {
	with := func(f func([]*lang.Provision) []*lang.Provision) string {
		img := sampleImage()
		img.Provision = f(sampleSteps())
		return ProvisionHash(img)
	}
	base := with(func(s []*lang.Provision) []*lang.Provision { return s })
	if base == "" || ProvisionHash(sampleImage()) != "" {
		t.Fatalf("ProvisionHash = %q with steps, %q without", base, ProvisionHash(sampleImage()))
	}
	changes := map[string]func([]*lang.Provision) []*lang.Provision{
		"name":          func(s []*lang.Provision) []*lang.Provision { s[0].Name = "other"; return s },
		"command":       func(s []*lang.Provision) []*lang.Provision { s[0].Run[2] = "apk add curl"; return s },
		"argument list": func(s []*lang.Provision) []*lang.Provision { s[1].Run = append(s[1].Run, ""); return s },
		"env value":     func(s []*lang.Provision) []*lang.Provision { s[0].Env["LANG"] = "C.UTF-8"; return s },
		"env name":      func(s []*lang.Provision) []*lang.Provision { s[0].Env = map[string]string{"LC_ALL": "C"}; return s },
		"timeout":       func(s []*lang.Provision) []*lang.Provision { s[0].Timeout = 2 * time.Minute; return s },
		"egress allow":  func(s []*lang.Provision) []*lang.Provision { s[0].Egress.Allow = nil; return s },
		"egress hosts":  func(s []*lang.Provision) []*lang.Provision { s[0].Egress.Hosts[0].Addr = "127.0.0.2:8080"; return s },
		"order":         func(s []*lang.Provision) []*lang.Provision { return []*lang.Provision{s[1], s[0]} },
		"a step less":   func(s []*lang.Provision) []*lang.Provision { return s[:1] },
	}
	for what, f := range changes {
		if with(f) == base {
			t.Errorf("changing the %s did not change the provision hash", what)
		}
	}
	same := map[string]func([]*lang.Provision) []*lang.Provision{
		"range":  func(s []*lang.Provision) []*lang.Provision { s[0].DeclRange.Start.Line = 40; return s },
		"origin": func(s []*lang.Provision) []*lang.Provision { s[0].Egress.Allow[0].Origin.Line = 90; return s },
		// Script is the source of Run, which is hashed.
		"script as written": func(s []*lang.Provision) []*lang.Provision { s[0].Script = ""; return s },
	}
	for what, f := range same {
		if with(f) != base {
			t.Errorf("changing the %s changed the provision hash", what)
		}
	}

	img := sampleImage()
	without := mustHash(t, img, samplePins())
	img.Provision = sampleSteps()
	if got := mustHash(t, img, samplePins()); got != without {
		t.Errorf("provision steps changed the input hash: %s, without %s", got, without)
	}
}

func TestImageHash(t *testing.T) {
	if got := ImageHash("sha256:aa", ""); got != "sha256:aa" {
		t.Errorf("an image without steps: %s, want its input hash", got)
	}
	a, b := ImageHash("sha256:aa", "sha256:01"), ImageHash("sha256:aa", "sha256:02")
	if a == "sha256:aa" || a == b {
		t.Errorf("provisioned image hashes %s, %s: want distinct from each other and the input hash", a, b)
	}
}

// TestCheckProvisionLocked: a lock whose provision hash is not the
// spec's is out of date, in every direction.
func TestCheckProvisionLocked(t *testing.T) {
	img := sampleImage()
	img.Provision = sampleSteps()
	l := lockFor(t)
	l.ProvisionHash = ProvisionHash(img)
	if err := CheckImageLocked(img, l); err != nil {
		t.Fatalf("an up-to-date lock of a provisioned image was refused: %v", err)
	}
	changed := sampleImage()
	changed.Provision = sampleSteps()
	changed.Provision[0].Run[2] = "apk add curl"
	if err := CheckImageLocked(changed, l); err == nil || !strings.Contains(err.Error(), "a provision step changed") {
		t.Errorf("a changed step: %v", err)
	}
	if err := CheckImageLocked(sampleImage(), l); err == nil || !strings.Contains(err.Error(), "no longer declares") {
		t.Errorf("steps removed: %v", err)
	}
	if err := CheckImageLocked(img, lockFor(t)); err == nil || !strings.Contains(err.Error(), "not in the lock") {
		t.Errorf("steps not locked: %v", err)
	}
}
