package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/sandbox"
	"github.com/sbx-dev/sbx/internal/supervisor"
	"github.com/sbx-dev/sbx/policy"
)

// TestGuestCommandChecksComeFirst: what is wrong with -e, -u or -w that
// no guest is needed to see is refused before anything is locked, built,
// booted or reached. For "sbx run" the configuration's image cannot be
// built here (there is nothing to build it from), so a refusal that came
// after the build would say that instead; for "sbx exec" no supervisor
// runs, so one that came after dialling it would say the sandbox is not
// running.
func TestGuestCommandChecksComeFirst(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/main.hcl", "sandbox \"a\" {\n  image      = image.i\n  forbid_env = [\"MOLTNET_*\"]\n}\nimage \"i\" {}\n")
	rt, err := os.MkdirTemp("", "sbx-rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	environ := []string{"SBX_RUNTIME_DIR=" + rt, "HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + t.TempDir()}
	sdir, err := supervisor.SandboxDir(supervisor.RuntimeBase(environ), dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(supervisor.Spec{Name: "a", Image: &sandbox.Image{Image: "i"}, Policy: policy.Sandbox{ForbidEnv: []string{"MOLTNET_*"}}})
	if err := os.WriteFile(filepath.Join(sdir, supervisor.SpecFile), spec, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, verb := range []string{"run", "exec"} {
		for _, c := range []struct {
			flags []string
			want  string
		}{
			{[]string{"-e", "MOLTNET_TOKEN=x"}, `forbidden in the guest's environment by forbid_env pattern "MOLTNET_*"`},
			{[]string{"-u", "root:"}, "Invalid -u"},
			{[]string{"-u", ":0"}, "Invalid -u"},
			{[]string{"-w", "tmp"}, `-w working directory "tmp" is not an absolute path`},
		} {
			var stderr bytes.Buffer
			args := append(append([]string{verb}, c.flags...), dir, "a", "--", "true")
			code := Run(args, &Env{Stdout: &stderr, Stderr: &stderr, Environ: environ, Context: context.Background()})
			if code != ExitError || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("sbx %s: exit %d, stderr:\n%s\nwant 1 and %q", strings.Join(args, " "), code, stderr.String(), c.want)
			}
		}
	}
}
