package archtest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestBuildsOnDarwin: the module compiles for macOS (arm64 and amd64),
// where sbx runs sandboxes under HVF: Linux-only code (memory files,
// eventfds, openat2) must sit behind build constraints with a
// counterpart that says it is Linux's. The import rules above see only
// the import graph; this type-checks every package.
func TestBuildsOnDarwin(t *testing.T) {
	for _, arch := range []string{"arm64", "amd64"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "build", "./...")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("GOOS=darwin GOARCH=%s go build ./...: %v\n%s", arch, err, out)
		}
	}
}
