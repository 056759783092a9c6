package command

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/fanout"
)

// TestEvalRefuses checks sbx eval's usage errors, each reported before
// anything is locked, built or booted: no lock file is written.
func TestEvalRefuses(t *testing.T) {
	cfgDir := t.TempDir()
	spec, err := os.ReadFile("../e2etest/testdata/eval/sbx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	fresh := filepath.Join(t.TempDir(), "r")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0", "-results", fresh, cfgDir, "evalbox", "--", "true"}, "the number of runs must be at least 1, not 0"},
		{[]string{"-n", "2", "-p", "-1", "-results", fresh, cfgDir, "evalbox", "--", "true"}, "at once must be at least 1, not -1"},
		{[]string{"-n", "2", cfgDir, "evalbox", "--", "true"}, "Name the results directory with -results DIR"},
		{[]string{"-n", "2", "-results", full, cfgDir, "evalbox", "--", "true"}, "is not empty"},
		{[]string{"-results", fresh, cfgDir, "nosuch", "--", "true"}, `No sandbox "nosuch"`},
		{[]string{"-results", fresh, cfgDir, "evalbox"}, "is not a sandbox's name"},
		{[]string{"-n", "x", "-results", fresh, cfgDir, "evalbox", "--", "true"}, "invalid value"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(append([]string{"eval"}, tc.args...), &Env{Stdout: &stdout, Stderr: &stderr, Context: context.Background()})
		if code != ExitError || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("sbx eval %s: exit %d, stderr:\n%s\nwant %q", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(cfgDir, "sbx.lock.hcl")); err == nil {
		t.Error("a refused eval wrote a lock file")
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("a refused eval made its results directory")
	}
}

// TestEvalOutputOnce checks that sbx eval prints each run's line once, on
// standard output as the run finishes, and then the count: the line is
// not repeated in a summary.
func TestEvalOutputOnce(t *testing.T) {
	var stdout bytes.Buffer
	out := &evalOutput{w: &stdout}
	out.run(fanout.Run{Run: 1, Status: fanout.StatusExited, ExitCode: 1, DurationMS: 1200})
	out.run(fanout.Run{Run: 0, Status: fanout.StatusTimeout, DurationMS: 3000})
	out.finish(2, 3, "/tmp/r")
	want := "run 1: exit 1 in 1.2s, 0 changed paths\nrun 0: timed out in 3s, 0 changed paths\n2 of 3 runs finished; results in /tmp/r\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
	}
}
