package lang

import (
	"slices"
	"testing"
	"time"
)

func TestProvisionSteps(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.hcl": `
image "agent" {
  base = "alpine:3.23"
  provision "tools" {
    script  = "echo hi > /etc/hi\n"
    env     = { LANG = "C" }
    timeout = "90s"
    egress {
      allow = ["mirror.test"]
      hosts = { "mirror.test" = "127.0.0.1:8080" }
    }
  }
  provision "after" {
    run = ["sh", "-c", "true"]
  }
}
`})
	cfg := mustLoad(t, dir, Options{})
	steps := cfg.Images["agent"].Provision
	if len(steps) != 2 || steps[0].Name != "tools" || steps[1].Name != "after" {
		t.Fatalf("steps = %+v, want tools then after", steps)
	}
	s := steps[0]
	if !slices.Equal(s.Run, []string{"/bin/sh", "-ec", "echo hi > /etc/hi\n"}) || s.Script == "" {
		t.Errorf("script step runs %q (script %q)", s.Run, s.Script)
	}
	if s.Env["LANG"] != "C" || s.Timeout != 90*time.Second {
		t.Errorf("env %v, timeout %v", s.Env, s.Timeout)
	}
	if len(s.Egress.Allow) != 1 || s.Egress.Allow[0].Pattern.Suffix != "mirror.test" ||
		len(s.Egress.Hosts) != 1 || s.Egress.Hosts[0].Addr != "127.0.0.1:8080" {
		t.Errorf("egress = %+v", s.Egress)
	}
	if o := s.Egress.Allow[0].Origin; o.Block != "image.agent.provision.tools" || o.Line != 9 {
		t.Errorf("allow rule's origin = %+v", o)
	}
	a := steps[1]
	if !slices.Equal(a.Run, []string{"sh", "-c", "true"}) || a.Timeout != DefaultProvisionTimeout {
		t.Errorf("run step: %q, timeout %v", a.Run, a.Timeout)
	}
	if len(a.Egress.Allow)+len(a.Egress.TCP)+len(a.Egress.Hosts) != 0 {
		t.Errorf("a step without egress may reach %+v", a.Egress)
	}
}
