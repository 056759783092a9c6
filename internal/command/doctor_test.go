package command

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/hostcheck"
	"github.com/sbx-dev/sbx/internal/machine/qemu/qemutest"
)

// doctorEnv is an environment with private runtime and cache directories
// and the given PATH.
func doctorEnv(t *testing.T, path string) []string {
	t.Helper()
	home := t.TempDir()
	return []string{
		"PATH=" + path,
		"HOME=" + home,
		"SBX_RUNTIME_DIR=" + filepath.Join(home, "run"),
		"SBX_CACHE_DIR=" + filepath.Join(home, "cache"),
	}
}

func runDoctorCmd(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(append([]string{"doctor"}, args...), &Env{Stdout: &out, Stderr: &errb, Environ: environ})
	return code, out.String(), errb.String()
}

// wantExit is the exit code doctor documents for a worst status.
func wantExit(st hostcheck.Status) int {
	switch st {
	case hostcheck.Fail:
		return ExitError
	case hostcheck.Warn:
		return ExitWarnings
	}
	return ExitOK
}

func TestDoctorJSON(t *testing.T) {
	qemutest.Require(t)
	code, stdout, stderr := runDoctorCmd(t, doctorEnv(t, os.Getenv("PATH")), "-json")
	var got struct {
		FormatVersion *string `json:"format_version"`
		Status        *string `json:"status"`
		Checks        []map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("doctor -json printed no JSON (%v):\n%s\nstderr: %s", err, stdout, stderr)
	}
	if got.FormatVersion == nil || *got.FormatVersion != "1" || got.Status == nil {
		t.Fatalf("doctor -json lacks format_version 1 or status:\n%s", stdout)
	}
	if code != wantExit(hostcheck.Status(*got.Status)) {
		t.Errorf("exit code %d for status %s", code, *got.Status)
	}
	names := map[string]map[string]any{}
	for _, c := range got.Checks {
		for _, f := range []string{"name", "status", "detail"} {
			if s, ok := c[f].(string); !ok || s == "" {
				t.Errorf("check %v has no %s", c, f)
			}
		}
		if _, hasFix := c["fix"]; hasFix == (c["status"] == "ok") {
			t.Errorf("check %v: fix must be present exactly when it is not ok", c)
		}
		names[c["name"].(string)] = c
	}
	for _, n := range []string{"qemu", "accel", "runtime-dir", "cache-dir"} {
		if names[n] == nil {
			t.Errorf("no %s check in:\n%s", n, stdout)
		}
	}
	if q := names["qemu"]; q == nil || q["status"] != "ok" {
		t.Errorf("the qemu check on a host with QEMU is %v", q)
	}
}

func TestDoctorWithoutQEMU(t *testing.T) {
	// A PATH with the tools a shell needs but no QEMU.
	bin := t.TempDir()
	for _, tool := range []string{"sh", "ls", "apt-get"} {
		if p, err := exec.LookPath(tool); err == nil {
			if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, stdout, stderr := runDoctorCmd(t, doctorEnv(t, bin), "-no-color")
	if code != ExitError {
		t.Errorf("exit code %d, want %d\n%s%s", code, ExitError, stdout, stderr)
	}
	if !strings.Contains(stdout, "fail  qemu ") || !strings.Contains(stdout, "not found in PATH ("+bin+")") {
		t.Errorf("doctor does not report QEMU missing:\n%s", stdout)
	}
	fix := "fix: apt-get install qemu-system-x86"
	if os.Geteuid() != 0 {
		fix = "fix: sudo apt-get install qemu-system-x86"
	}
	if hostcheck.Detect("", bin) == hostcheck.Apt && !strings.Contains(stdout, fix) {
		t.Errorf("doctor does not print %q on this Debian host:\n%s", fix, stdout)
	}
	if !strings.Contains(stdout, "failure") {
		t.Errorf("no summary line:\n%s", stdout)
	}
}

func TestDoctorRuntimeDirMode(t *testing.T) {
	env := doctorEnv(t, os.Getenv("PATH"))
	base := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(base, 0o750); err != nil {
		t.Fatal(err)
	}
	env = append(env, "SBX_RUNTIME_DIR="+base)
	code, stdout, _ := runDoctorCmd(t, env, "-json")
	var got struct {
		Status string
		Checks []hostcheck.Result
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	var rd *hostcheck.Result
	for i := range got.Checks {
		if got.Checks[i].Name == "runtime-dir" {
			rd = &got.Checks[i]
		}
	}
	if rd == nil || rd.Status != hostcheck.Warn || !strings.Contains(rd.Detail, "0750") || rd.Fix != "chmod 700 "+base {
		t.Fatalf("runtime dir of mode 0750 reported as %+v", rd)
	}
	if code == ExitOK {
		t.Errorf("exit code 0 with a warning")
	}
}

func TestDoctorConfigSources(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), `
image "x" {
  artifact "a" {
    source = "deb:no-such-package-sbx-doctor"
    dest   = "/a"
  }
}

sandbox "s" {
  image = image.x
}
`)
	code, stdout, stderr := runDoctorCmd(t, doctorEnv(t, os.Getenv("PATH")), "-no-color", dir)
	if code != ExitError {
		t.Errorf("exit code %d, want %d", code, ExitError)
	}
	for _, want := range []string{"ok    config ", "fail  apt ", "apt knows no package no-such-package-sbx-doctor"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s%s", want, stdout, stderr)
		}
	}
	if strings.Contains(stdout, " npm ") || strings.Contains(stdout, " oci ") {
		t.Errorf("doctor checks npm or oci for a configuration without such sources:\n%s", stdout)
	}

	// Without DIR, the current directory is the configuration when it
	// holds spec files.
	t.Chdir(dir)
	if _, stdout, _ := runDoctorCmd(t, doctorEnv(t, os.Getenv("PATH")), "-no-color"); !strings.Contains(stdout, "fail  apt ") {
		t.Errorf("doctor in a configuration directory does not check it:\n%s", stdout)
	}
	empty := t.TempDir()
	writeFile(t, filepath.Join(empty, "sbx.lock.hcl"), "")
	t.Chdir(empty)
	if _, stdout, _ := runDoctorCmd(t, doctorEnv(t, os.Getenv("PATH")), "-no-color"); strings.Contains(stdout, " config ") {
		t.Errorf("doctor takes a directory with only a lock file for a configuration:\n%s", stdout)
	}
}
