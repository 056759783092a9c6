package provision

import (
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/policy"
)

// TestStepPolicy: a step's machine gets its egress rules and nothing
// else a policy can carry: no secrets, no mounts.
func TestStepPolicy(t *testing.T) {
	in := policy.Sandbox{
		Allow:   []policy.AllowRule{{Pattern: policy.HostPattern{Suffix: "mirror.test"}}},
		Hosts:   []policy.HostMapping{{Name: "mirror.test", Addr: "127.0.0.1:8080"}},
		Secrets: []policy.SecretBinding{{Name: "token"}},
		Mounts:  []policy.Mount{{Guest: "/w", Host: "."}},
	}
	got := stepPolicy(in)
	if len(got.Secrets) != 0 || len(got.Mounts) != 0 {
		t.Errorf("a step's policy carries secrets %v or mounts %v", got.Secrets, got.Mounts)
	}
	if len(got.Allow) != 1 || len(got.Hosts) != 1 {
		t.Errorf("a step's policy lost its rules: %+v", got)
	}
	if p := stepPolicy(policy.Sandbox{}); len(p.Allow)+len(p.TCP)+len(p.Hosts) != 0 {
		t.Errorf("a step without egress may reach %+v", p)
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	tl.Write([]byte("hello "))
	tl.Write([]byte("world, again"))
	if got := tl.String(); !strings.HasSuffix(got, "again") || len(got) != 8 {
		t.Errorf("tail = %q, want the last 8 bytes", got)
	}
	if got := envList(map[string]string{"B": "2", "A": "1"}); strings.Join(got, " ") != "A=1 B=2" {
		t.Errorf("envList = %q", got)
	}
}
