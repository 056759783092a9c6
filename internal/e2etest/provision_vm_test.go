package e2etest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// provisionSteps are the test image's provision steps: one writes a
// file and installs a command with a shell script; one, whose egress
// allows only mirror.test, fetches from it and checks that other.test
// (mapped to the same server, not allowed) is refused. @UPSTREAM@ and
// @MARK@ are replaced.
const provisionSteps = `
  provision "install" {
    script = <<-EOT
      echo provisioned-@MARK@ > /etc/provisioned
      mkdir -p /opt/tool/bin
      printf '#!/bin/sh\necho tool works\n' > /opt/tool/bin/tool
      chmod 0755 /opt/tool/bin/tool
    EOT
  }

  provision "fetch" {
    run     = ["sh", "-c", "wget -q -O /etc/fetched http://mirror.test/payload && if wget -q -O /dev/null http://other.test/refused; then echo other.test was reached; exit 9; fi"]
    timeout = "3m"
    egress {
      allow = ["mirror.test"]
      hosts = {
        "mirror.test" = "@UPSTREAM@"
        "other.test"  = "@UPSTREAM@"
      }
    }
  }
`

// provisionConfig writes the hermetic box image with steps into a new
// configuration directory.
func provisionConfig(t *testing.T, steps string) string {
	t.Helper()
	cfgDir := t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		if err := os.Link(filepath.Join(dir, name), filepath.Join(cfgDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	quoted := make([]string, len(machinetest.Applets))
	for i, a := range machinetest.Applets {
		quoted[i] = `"` + a + `"`
	}
	spec := fmt.Sprintf(machinetest.Spec, strings.Join(quoted, ", "))
	at := `  file "/etc/motd" {`
	if !strings.Contains(spec, at) {
		t.Fatal("the fixture's spec has no file block to put the steps before")
	}
	spec = strings.Replace(spec, at, steps+"\n"+at, 1)
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgDir
}

// TestProvisionInVM: an image's provision steps run as root in a VM of
// its disk, with their own egress; the sandbox booted from the image
// sees what they wrote; a failing step, and one past its timeout, fail
// the build naming it; a changed step is another build on the same base
// disk.
func TestProvisionInVM(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		mu.Lock()
		hosts = append(hosts, host+r.URL.Path)
		mu.Unlock()
		fmt.Fprint(w, "payload from the mirror\n")
	}))
	defer srv.Close()
	steps := strings.ReplaceAll(provisionSteps, "@UPSTREAM@", srv.Listener.Addr().String())

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	build := func(steps string) (*sbx.Config, *sbx.Image, error) {
		cfg, err := sbx.Load(provisionConfig(t, steps), sbx.Options{Environ: environ})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		img, err := cfg.Build(ctx, "box")
		t.Logf("built in %v", time.Since(start).Round(time.Second))
		return cfg, img, err
	}

	cfg, img, err := build(strings.ReplaceAll(steps, "@MARK@", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if img.ProvisionHash == "" || img.BaseKey == "" || img.BaseKey == img.BuildKey {
		t.Errorf("provisioned image: provision hash %q, base key %q, key %q", img.ProvisionHash, img.BaseKey, img.BuildKey)
	}
	mu.Lock()
	seen := strings.Join(hosts, " ")
	mu.Unlock()
	if seen != "mirror.test/payload" {
		t.Errorf("the fixture served %q; want mirror.test/payload only (other.test is not allowed)", seen)
	}

	sb, err := sbx.Start(ctx, cfg, "box", sbx.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	for cmd, want := range map[string]string{
		"cat /etc/provisioned": "provisioned-one\n",
		"/opt/tool/bin/tool":   "tool works\n",
		"cat /etc/fetched":     "payload from the mirror\n",
	} {
		out, code, err := guestExec(ctx, sb, time.Minute, sbx.Cmd{Args: []string{"sh", "-c", cmd}})
		if err != nil || code != 0 || out != want {
			t.Errorf("%s in the sandbox: %q, exit %d, %v; want %q", cmd, out, code, err, want)
		}
	}
	sb.Stop(ctx)

	// Another command in a step: another build, on the same base disk.
	_, img2, err := build(strings.ReplaceAll(steps, "@MARK@", "two"))
	if err != nil {
		t.Fatal(err)
	}
	if img2.BaseKey != img.BaseKey || img2.BuildKey == img.BuildKey || img2.ProvisionHash == img.ProvisionHash {
		t.Errorf("changed step: base %s (was %s), key %s (was %s)", img2.BaseKey, img.BaseKey, img2.BuildKey, img.BuildKey)
	}

	// A step that fails names itself, its status and its output.
	_, _, err = build(`
  provision "broken" {
    script = "echo about to fail >&2; exit 7"
  }
`)
	if err == nil || !strings.Contains(err.Error(), `provision step "broken" exited with status 7`) || !strings.Contains(err.Error(), "about to fail") {
		t.Errorf("a failing step: %v", err)
	}

	// A step that runs past its timeout fails too, naming itself.
	start := time.Now()
	_, _, err = build(`
  provision "slow" {
    run     = ["sleep", "600"]
    timeout = "5s"
  }
`)
	if err == nil || !strings.Contains(err.Error(), `provision step "slow" timed out`) {
		t.Errorf("a step past its timeout: %v", err)
	}
	if took := time.Since(start); took > 4*time.Minute {
		t.Errorf("the timed-out build took %v", took)
	}
}
