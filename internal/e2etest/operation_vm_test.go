package e2etest

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
	"github.com/sbx-dev/sbx/internal/command"
)

// TestPlanApplyInVM plans and applies a configuration through the Go
// API, as sbx plan and sbx apply do: the plan creates the sandbox, Apply
// starts it under its own supervisor (this test binary acting as sbx),
// sbx exec reaches it, a second plan has nothing to do, and the first
// plan, applied again, is refused as out of date.
func TestPlanApplyInVM(t *testing.T) {
	cfgDir, _ := execMountConfig(t)
	runtime, err := os.MkdirTemp("", "sbx-rt")
	if err != nil {
		t.Fatal(err)
	}
	env := append(append([]string{}, environ...), "SBX_RUNTIME_DIR="+runtime, execMountAsSbxEnv+"=1")
	sbxCLI := func(timeout time.Duration, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var stdout, stderr bytes.Buffer
		code := command.Run(args, &command.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Environ: env, Context: ctx})
		return code, stdout.String(), stderr.String()
	}
	t.Cleanup(func() {
		sbxCLI(5*time.Minute, "destroy", "-auto-approve", cfgDir)
		os.RemoveAll(runtime)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.Plan(ctx, sbx.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Changes {
		got = append(got, c.Action+" "+c.Address)
	}
	if !strings.Contains(strings.Join(got, ","), "create sandbox.mnt") {
		t.Fatalf("the plan is %q; want it to create sandbox.mnt", got)
	}
	res, err := cfg.Apply(ctx, p, sbx.ApplyOptions{})
	if err != nil {
		t.Fatalf("Apply: %v (%+v)", err, res)
	}
	if res.Created == 0 || res.Failed != 0 {
		t.Errorf("Apply counted %+v", res)
	}
	code, out, errOut := sbxCLI(execMountTimeout, "exec", cfgDir, "mnt", "--", "/workspace/hello.sh", "applied")
	if code != 0 || out != "hello from the mount applied\n" {
		t.Errorf("sbx exec in the applied sandbox: exit %d, %q\n%s", code, out, errOut)
	}
	again, err := cfg.Plan(ctx, sbx.PlanOptions{})
	if err != nil || again.HasChanges() {
		t.Errorf("the plan after Apply: %+v, %v; want no changes", again, err)
	}
	if _, err := cfg.Apply(ctx, p, sbx.ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "The saved plan is out of date") {
		t.Errorf("applying the first plan again: %v; want it refused as out of date", err)
	}
}
