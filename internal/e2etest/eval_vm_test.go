package e2etest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-dev/sbx"
)

// evalSecret is the hidden .env's content: no copy may hold it.
const evalSecret = "TOKEN=sk-eval-host-only-51c0"

// evalConfig makes a configuration directory for the eval tests: the
// fixture's kernel and busybox packages, testdata/eval/sbx.hcl,
// and the host tree ./work it mounts, with a hidden .env and key.
func evalConfig(t *testing.T) (cfgDir, work string) {
	t.Helper()
	cfgDir = t.TempDir()
	for _, name := range []string{"kernel.deb", "busybox.deb"} {
		if err := os.Link(filepath.Join(dir, name), filepath.Join(cfgDir, name)); err != nil {
			data, rerr := os.ReadFile(filepath.Join(dir, name))
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err := os.WriteFile(filepath.Join(cfgDir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	spec, err := os.ReadFile("testdata/eval/sbx.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "sbx.hcl"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	work = filepath.Join(cfgDir, "work")
	for name, content := range map[string]string{
		"README.md":      "hello from the host\n",
		"src/keep.txt":   "kept\n",
		"src/remove.txt": "every run removes me\n",
		".env":           evalSecret + "\n",
		"keys/id.pem":    "-----BEGIN PRIVATE KEY----- eval-host-only\n",
		"scratch/big":    "host scratch, never copied\n",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfgDir, work
}

// evalScript is each run's command: it adds a file of its own, edits
// README.md, removes src/remove.txt, fails (exit 3) if it sees another
// run's file and (exit 4) if it sees a hidden one, writes to both
// streams and exits with its index modulo 3.
const evalScript = `set -e
cd /workspace
for f in out-*.txt; do
	if [ -e "$f" ]; then echo "run $SBX_RUN saw $f"; exit 3; fi
done
if [ -e .env ] || [ -e keys/id.pem ] || [ -e scratch/big ]; then echo "run $SBX_RUN sees a hidden file"; exit 4; fi
echo "run $SBX_RUN of $SBX_RUNS" > "out-$SBX_RUN.txt"
echo "edited by $SBX_RUN" >> README.md
rm src/remove.txt
echo "stdout-$SBX_RUN"
echo "stderr-$SBX_RUN" >&2
sleep 1
exit $((SBX_RUN % 3))
`

// copiesSeen watches the eval's work directory while it runs and counts
// the workspace copies it finds (each run's, and the snapshot), and
// those that hold a hidden or tmpfs path.
type copiesSeen struct {
	mu           sync.Mutex
	copies, bad  int
	badPaths     []string
	seenReadmeIn map[string]bool
}

func (c *copiesSeen) watch(ctx context.Context, workDir string) {
	c.seenReadmeIn = map[string]bool{}
	for ctx.Err() == nil {
		copies, _ := filepath.Glob(filepath.Join(workDir, "*", "0"))
		base, _ := filepath.Glob(filepath.Join(workDir, "base", "*"))
		for _, cp := range append(copies, base...) {
			if _, err := os.Lstat(filepath.Join(cp, "README.md")); err != nil {
				continue
			}
			c.mu.Lock()
			if !c.seenReadmeIn[cp] {
				c.seenReadmeIn[cp] = true
				c.copies++
			}
			for _, hidden := range []string{".env", "keys/id.pem", "scratch"} {
				if p := filepath.Join(cp, hidden); !slices.Contains(c.badPaths, p) {
					if _, err := os.Lstat(p); err == nil {
						c.bad++
						c.badPaths = append(c.badPaths, p)
					}
				}
			}
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestEvalInVM runs an eval of 8 runs, at most 4 at once, through the
// Go API, and checks: every run finished with its own exit code and
// output; its changes are exactly its own added file, the edit and the
// deletion (so no run saw another's changes, which the command also
// checks from inside); the tarball and diff hold them; at most 4 ran at
// once; no workspace copy ever held a hidden or tmpfs path (watched on
// the host while the eval ran, and checked from inside); the host's
// tree is unchanged; the work directory is gone.
func TestEvalInVM(t *testing.T) {
	cfgDir, work := evalConfig(t)
	before := treeHash(t, work)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(t.TempDir(), "results")
	watchCtx, stopWatch := context.WithCancel(ctx)
	var seen copiesSeen
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		seen.watch(watchCtx, filepath.Join(results, ".work"))
	}()
	const runs, parallel = 8, 4
	start := time.Now()
	res, err := sbx.Eval(ctx, cfg, "evalbox", sbx.EvalOptions{
		Runs:       runs,
		Parallel:   parallel,
		Cmd:        sbx.Cmd{Args: []string{"sh", "-c", evalScript}},
		ResultsDir: results,
		Timeout:    5 * time.Minute,
		Start:      sbx.StartOptions{Environ: environ},
	})
	stopWatch()
	<-watched
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d runs, %d at once, in %v", runs, parallel, time.Since(start).Round(time.Second))

	if got := treeHash(t, work); got != before {
		t.Errorf("the host's tree changed: %s, was %s", got, before)
	}
	if seen.copies < 2 || seen.bad > 0 {
		t.Errorf("watched %d workspace copies; %d held a hidden or tmpfs path: %v", seen.copies, seen.bad, seen.badPaths)
	}
	if _, err := os.Lstat(filepath.Join(results, ".work")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the work directory is still there: %v", err)
	}
	if info, err := os.Stat(results); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("results directory: %v, %v", info.Mode(), err)
	}

	index := readIndex(t, results)
	if len(index) != runs || len(res.Runs) != runs {
		t.Fatalf("%d index lines and %d results, want %d", len(index), len(res.Runs), runs)
	}
	got := map[int]bool{}
	for _, r := range index {
		if got[r.Run] {
			t.Errorf("run %d is twice in the index", r.Run)
		}
		got[r.Run] = true
		checkEvalRun(t, results, r)
	}
	// At most parallel at once, and more than one: each run holds its
	// slot from its copy to its collection.
	most := 0
	for _, r := range index {
		at := r.Started.Add(time.Millisecond)
		n := 0
		for _, o := range index {
			if !o.Started.After(at) && o.Started.Add(time.Duration(o.DurationMS)*time.Millisecond).After(at) {
				n++
			}
		}
		most = max(most, n)
	}
	if most > parallel || most < 2 {
		t.Errorf("at most %d runs ran at once; want 2 to %d", most, parallel)
	}
}

// checkEvalRun checks one finished run of evalScript.
func checkEvalRun(t *testing.T, results string, r sbx.EvalRun) {
	t.Helper()
	i := r.Run
	if r.Status != "exited" || r.ExitCode != i%3 || r.Error != "" {
		t.Errorf("run %d: status %s, exit %d, error %q", i, r.Status, r.ExitCode, r.Error)
	}
	if r.BootMS <= 0 || r.CommandMS < 1000 || r.DurationMS < r.BootMS+r.CommandMS {
		t.Errorf("run %d: durations boot %d, command %d, all %d ms", i, r.BootMS, r.CommandMS, r.DurationMS)
	}
	for file, want := range map[string]string{r.Stdout: fmt.Sprintf("stdout-%d\n", i), r.Stderr: fmt.Sprintf("stderr-%d\n", i)} {
		data, err := os.ReadFile(filepath.Join(results, file))
		if err != nil || string(data) != want {
			t.Errorf("run %d: %s holds %q (%v), want %q", i, file, data, err, want)
		}
	}
	var changes []string
	for _, c := range r.Changes {
		changes = append(changes, c.Change+" "+c.Type+" "+c.Path)
	}
	wantChanges := []string{
		"modified file /workspace/README.md",
		fmt.Sprintf("added file /workspace/out-%d.txt", i),
		"deleted file /workspace/src/remove.txt",
	}
	if !slices.Equal(changes, wantChanges) {
		t.Errorf("run %d changed\n%s\nwant\n%s", i, strings.Join(changes, "\n"), strings.Join(wantChanges, "\n"))
	}
	files := map[string]string{}
	f, err := os.Open(filepath.Join(results, r.ChangesTar))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("run %d: %s: %v", i, r.ChangesTar, err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = string(data)
	}
	wantFiles := map[string]string{
		"workspace/README.md":                  fmt.Sprintf("hello from the host\nedited by %d\n", i),
		fmt.Sprintf("workspace/out-%d.txt", i): fmt.Sprintf("run %d of 8\n", i),
	}
	if fmt.Sprint(files) != fmt.Sprint(wantFiles) {
		t.Errorf("run %d: the tarball holds %q, want %q", i, files, wantFiles)
	}
	diff, err := os.ReadFile(filepath.Join(results, r.ChangesDiff))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("+edited by %d\n", i), "-every run removes me\n", "+++ /dev/null\n"} {
		if !bytes.Contains(diff, []byte(want)) {
			t.Errorf("run %d: the diff lacks %q:\n%s", i, want, diff)
		}
	}
	if bytes.Contains(diff, []byte("sk-eval-host-only")) {
		t.Errorf("run %d: the diff holds the hidden secret", i)
	}
}

// readIndex reads a results directory's index.
func readIndex(t *testing.T, results string) []sbx.EvalRun {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(results, "index.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sbx.EvalRun
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var r sbx.EvalRun
		if err := dec.Decode(&r); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("index line %d: %v", len(out)+1, err)
		}
		out = append(out, r)
	}
}

// TestEvalInterruptInVM interrupts an eval of 4 runs, 2 at once, as soon
// as its first run is in the index, while the other sleeps: Eval returns
// the interrupt, the index and the runs directory hold that run only,
// the work directory is gone and no QEMU process of the eval is left.
func TestEvalInterruptInVM(t *testing.T) {
	cfgDir, _ := evalConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg, err := sbx.Load(cfgDir, sbx.Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	// The VMs' directories go here, so that their QEMU processes are
	// told apart from any other on the machine by their command lines.
	vmDir, err := os.MkdirTemp("", "sbx-evalint-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(vmDir)
	results := filepath.Join(t.TempDir(), "results")
	evalCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	res, err := sbx.Eval(evalCtx, cfg, "evalbox", sbx.EvalOptions{
		Runs:     4,
		Parallel: 2,
		Cmd: sbx.Cmd{Args: []string{"sh", "-c", `cd /workspace
echo "$SBX_RUN" > "done-$SBX_RUN"
if [ "$SBX_RUN" = 0 ]; then echo first; exit 0; fi
sleep 600`}},
		ResultsDir: results,
		Start:      sbx.StartOptions{Environ: environ, Dir: vmDir},
		OnRun:      func(sbx.EvalRun) { interrupt() },
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Eval returned %v, want the interrupt", err)
	}
	if res == nil || len(res.Runs) != 1 || res.Runs[0].Run != 0 {
		t.Fatalf("finished runs: %+v", res)
	}
	index := readIndex(t, results)
	if len(index) != 1 || index[0].Run != 0 || index[0].ExitCode != 0 || len(index[0].Changes) != 1 || index[0].Changes[0].Path != "/workspace/done-0" {
		t.Errorf("index after the interrupt: %+v", index)
	}
	if out, err := os.ReadFile(filepath.Join(results, index[0].Stdout)); err != nil || string(out) != "first\n" {
		t.Errorf("run 0's stdout: %q, %v", out, err)
	}
	ents, err := os.ReadDir(filepath.Join(results, "runs"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "0" {
		t.Errorf("runs directory after the interrupt: %v, %v", ents, err)
	}
	if _, err := os.Lstat(filepath.Join(results, ".work")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the work directory is still there: %v", err)
	}
	if left := processesUnder(t, vmDir); len(left) > 0 {
		t.Errorf("processes of the eval's VMs are left: %v", left)
	}
}

// processesUnder returns the processes whose command line names a path
// under dir.
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if bytes.Contains(data, []byte(dir+"/")) {
			out = append(out, fmt.Sprintf("%s: %s", filepath.Base(filepath.Dir(p)), bytes.ReplaceAll(data, []byte{0}, []byte{' '})))
		}
	}
	return out
}
