package command

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/state"
)

// outputSpec declares no sandbox, so apply has nothing to build or start
// and records its outputs only.
const outputSpec = `
variable "region" {
  default = "eu"
}

locals {
  hosts = ["a", "b"]
}

output "url" {
  value       = "https://${var.region}.example.test"
  description = "where it is"
}

output "hosts" {
  value = [for h in local.hosts : "${h}.${var.region}"]
}

output "conf" {
  value = { n = 3, f = 2.5, ok = true, none = null, esc = "a\u001b[2Jb" }
}

output "token" {
  value     = "s3cret"
  sensitive = true
}
`

func runOutputCmd(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(args, &Env{Stdout: &out, Stderr: &errb, Environ: []string{"HOME=" + dir, "SBX_RUNTIME_DIR=" + filepath.Join(dir, "run")}})
	return code, out.String(), errb.String()
}

// TestOutput checks that apply records the output blocks' values in
// the state and prints them, that sbx output shows them in each form,
// that a later apply records new values, and that destroy removes them.
func TestOutput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.hcl"), outputSpec)

	if code, out, errOut := runOutputCmd(t, dir, "output", dir); code != ExitOK || out != "" || !strings.Contains(errOut, "No outputs") {
		t.Fatalf("output before any apply: %d %q %q", code, out, errOut)
	}
	code, out, errOut := runOutputCmd(t, dir, "apply", "-auto-approve", dir)
	if code != ExitOK {
		t.Fatalf("apply: %d\n%s%s", code, out, errOut)
	}
	all := `conf = {
  "esc" = "a\x1b[2Jb"
  "f" = 2.5
  "n" = 3
  "none" = null
  "ok" = true
}
hosts = [
  "a.eu",
  "b.eu",
]
token = <sensitive>
url = "https://eu.example.test"
`
	if !strings.HasSuffix(out, "Outputs:\n\n"+all) {
		t.Errorf("apply's output does not end with the outputs:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"output", dir}, all},
		{[]string{"output", dir, "token"}, "\"s3cret\"\n"},
		{[]string{"output", dir, "output.url"}, "\"https://eu.example.test\"\n"},
		{[]string{"output", "-raw", dir, "url"}, "https://eu.example.test"},
		{[]string{"output", "-raw", dir, "token"}, "s3cret"},
		{[]string{"output", "-json", dir, "hosts"}, "[\n  \"a.eu\",\n  \"b.eu\"\n]\n"},
	} {
		code, out, errOut := runOutputCmd(t, dir, tc.args...)
		if code != ExitOK || out != tc.want {
			t.Errorf("sbx %s: %d, %q (%s), want %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
	code, out, _ = runOutputCmd(t, dir, "output", "-json", dir)
	var got map[string]struct {
		Value     any  `json:"value"`
		Sensitive bool `json:"sensitive"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != ExitOK {
		t.Fatalf("output -json: %d %v\n%s", code, err, out)
	}
	if len(got) != 4 || got["token"].Value != "s3cret" || !got["token"].Sensitive || got["url"].Sensitive || got["conf"].Value.(map[string]any)["n"] != 3.0 {
		t.Errorf("output -json = %+v", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"output", dir, "nope"}, `no output "nope". It records: conf, hosts, token, url.`},
		{[]string{"output", "-raw", dir, "hosts"}, "-raw prints only a string, a number or a bool"},
		{[]string{"output", "-raw", dir}, "-raw prints one output's value"},
		{[]string{"output", dir, "url", "hosts"}, "takes [DIR] [NAME]"},
	} {
		code, out, errOut := runOutputCmd(t, dir, tc.args...)
		if code != ExitError || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("sbx %s: %d, %q, %q; want exit 1 and %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}

	// An apply with other values records them; one with the same values
	// leaves the state as it is.
	st, err := state.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	serial := st.Serial
	if code, out, errOut := runOutputCmd(t, dir, "apply", "-auto-approve", dir); code != ExitOK {
		t.Fatalf("apply again: %d\n%s%s", code, out, errOut)
	}
	if st, err := state.Load(dir); err != nil || st.Serial != serial {
		t.Errorf("an apply with the same outputs saved the state: serial %d, was %d (%v)", st.Serial, serial, err)
	}
	if code, out, errOut := runOutputCmd(t, dir, "apply", "-auto-approve", "-var", "region=us", dir); code != ExitOK {
		t.Fatalf("apply -var: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runOutputCmd(t, dir, "output", dir, "url"); code != ExitOK || out != "\"https://us.example.test\"\n" {
		t.Errorf("output url after apply -var region=us: %d %q", code, out)
	}

	if code, out, errOut := runOutputCmd(t, dir, "destroy", "-auto-approve", dir); code != ExitOK {
		t.Fatalf("destroy: %d\n%s%s", code, out, errOut)
	}
	if st, err := state.Load(dir); err != nil || st.Outputs != nil {
		t.Errorf("after destroy the state records outputs %v (%v)", st.Outputs, err)
	}
}

func TestFormatValue(t *testing.T) {
	for in, want := range map[string]string{
		`"x"`:               `"x"`,
		`1e3`:               `1e3`,
		`[]`:                `[]`,
		`{}`:                `{}`,
		`[[1], {"a": "b"}]`: "[\n  [\n    1,\n  ],\n  {\n    \"a\" = \"b\"\n  },\n]",
		`"tab\there\u0007"`: `"tab\there\a"`,
		`{"k\n": null}`:     "{\n  \"k\\n\" = null\n}",
		"not json \x1b[2J":  `not json \x1b[2J`,
	} {
		if got := formatValue(json.RawMessage(in), ""); got != want {
			t.Errorf("formatValue(%s) = %q, want %q", in, got, want)
		}
	}
}
