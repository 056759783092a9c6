package command

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-dev/sbx/internal/fanout"
	"github.com/sbx-dev/sbx/internal/machine/machinetest"
)

// evalIndex reads a results directory's index.
func evalIndex(t *testing.T, results string) []fanout.Run {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(results, fanout.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []fanout.Run
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var r fanout.Run
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestEvalCommand runs sbx eval on the eval spec (internal/e2etest/testdata/eval) twice:
// 3 runs 2 at once with an -e variable and -i, which all finish with
// their own exit codes and files, each having read the same input; then 3 runs one at a time, interrupted once the
// first has finished while the second sleeps: exit 130, "Interrupted",
// and the index holds the first run only; last, one run whose command
// outlives -timeout, recorded with status "timeout".
func TestEvalCommand(t *testing.T) {
	f, _, _ := machinetest.Require(t)
	cfgDir := t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		writeFile(t, filepath.Join(cfgDir, name), string(readFile(t, filepath.Join(f.Dir, name))))
	}
	writeFile(t, filepath.Join(cfgDir, "sbx.hcl"), string(readFile(t, "../e2etest/testdata/eval/sbx.hcl")))
	writeFile(t, filepath.Join(cfgDir, "work/README.md"), "host\n")
	writeFile(t, filepath.Join(cfgDir, "work/.env"), "TOKEN=host-only\n")

	eval := func(ctx context.Context, stdout *lockedBuffer, stderr io.Writer, args ...string) (int, string) {
		if stdout == nil {
			stdout = new(lockedBuffer)
		}
		code := Run(append([]string{"eval"}, args...), &Env{Stdin: strings.NewReader("input\n"), Stdout: stdout, Stderr: stderr, Environ: f.Environ, Context: ctx})
		return code, string(stdout.Bytes())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	results := filepath.Join(t.TempDir(), "r1")
	var stderr lockedBuffer
	code, stdout := eval(ctx, nil, &stderr, "-n", "3", "-p", "2", "-i", "-e", "GREETING=hi", "-results", results, cfgDir, "evalbox", "--",
		"sh", "-c", `test ! -e /workspace/.env || exit 9; read line; echo "$GREETING-$SBX_RUN-$line" > "/workspace/r-$SBX_RUN"; echo out; exit $SBX_RUN`)
	t.Logf("exit %d\n--- stdout\n%s--- stderr\n%s", code, stdout, string(stderr.Bytes()))
	if code != ExitOK {
		t.Fatalf("sbx eval exited %d", code)
	}
	for _, want := range []string{"run 0: exit 0 in ", "run 1: exit 1 in ", "run 2: exit 2 in ", "s, 1 changed path\n", "3 of 3 runs finished; results in "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for run := range 3 {
		line := fmt.Sprintf("run %d: ", run)
		if n := strings.Count(stdout, line) + strings.Count(string(stderr.Bytes()), line); n != 1 {
			t.Errorf("%q is printed %d times, not once", line, n)
		}
	}
	index := evalIndex(t, results)
	if len(index) != 3 {
		t.Fatalf("index has %d lines", len(index))
	}
	for _, r := range index {
		if r.ExitCode != r.Run || len(r.Changes) != 1 || r.Changes[0].Path != fmt.Sprintf("/workspace/r-%d", r.Run) {
			t.Errorf("run %d: exit %d, changes %+v", r.Run, r.ExitCode, r.Changes)
			continue
		}
		tf, err := os.Open(filepath.Join(results, r.ChangesTar))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(tf)
		h, err := tr.Next()
		data, _ := io.ReadAll(tr)
		tf.Close()
		if err != nil || h.Name != fmt.Sprintf("workspace/r-%d", r.Run) || string(data) != fmt.Sprintf("hi-%d-input\n", r.Run) {
			t.Errorf("run %d: tarball entry %v %q, %v", r.Run, h, data, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cfgDir, "work/r-0")); err == nil {
		t.Error("a run's file reached the host's tree")
	}

	// Interrupted after the first run.
	ictx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	results2 := filepath.Join(t.TempDir(), "r2")
	var stdout2, stderr2 lockedBuffer
	go func() {
		for ictx.Err() == nil && !strings.Contains(string(stdout2.Bytes()), "run 0: ") {
			time.Sleep(50 * time.Millisecond)
		}
		interrupt()
	}()
	code, stdout = eval(ictx, &stdout2, &stderr2, "-n", "3", "-results", results2, cfgDir, "evalbox", "--",
		"sh", "-c", `if [ "$SBX_RUN" = 0 ]; then exit 0; fi; sleep 600`)
	t.Logf("exit %d\n--- stdout\n%s--- stderr\n%s", code, stdout, string(stderr2.Bytes()))
	if code != ExitInterrupted || !strings.Contains(string(stderr2.Bytes()), "Interrupted: every VM was stopped; 1 finished run is in the index") {
		t.Errorf("interrupted sbx eval: exit %d", code)
	}
	if index := evalIndex(t, results2); len(index) != 1 || index[0].Run != 0 {
		t.Errorf("index after the interrupt: %+v", index)
	}

	// A command over -timeout is killed and recorded as such.
	results3 := filepath.Join(t.TempDir(), "r3")
	var stderr3 lockedBuffer
	code, stdout = eval(ctx, nil, &stderr3, "-timeout", "3s", "-results", results3, cfgDir, "evalbox", "--", "sleep", "600")
	t.Logf("exit %d\n--- stdout\n%s--- stderr\n%s", code, stdout, string(stderr3.Bytes()))
	index = evalIndex(t, results3)
	if code != ExitOK || !strings.Contains(stdout, "run 0: timed out in ") || len(index) != 1 || index[0].Status != fanout.StatusTimeout ||
		index[0].ExitCode != -1 || index[0].CommandMS < 3000 || index[0].CommandMS > 60000 {
		t.Errorf("timed-out eval: exit %d, index %+v", code, index)
	}
}
