package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/lockfiles"
	"github.com/sbx-dev/sbx/plan"
	"github.com/sbx-dev/sbx/policy"
	"github.com/sbx-dev/sbx/state"
)

const showUsage = `
Usage: sbx show [options] [FILE|DIR]

  Show a saved plan (from "sbx plan -out FILE"), a lock file
  (sbx.lock.hcl) or a state file (.sbx/state.json). The kind is recognised
  from the file's name and content. A directory, or no argument at all,
  means that configuration directory's state.

Options:

  -json               Print JSON: a plan in the format of docs/plan-json.md,
                      the state as stored, a lock file as an object of
                      images and their pins.
  -no-color           Print without colour.
`

type showArgs struct {
	target  string
	json    bool
	noColor bool
}

func runShow(_ context.Context, env *Env, args []string) int {
	var a showArgs
	flags := newFlagSet("show")
	flags.BoolVar(&a.json, "json", false, "")
	flags.BoolVar(&a.noColor, "no-color", false, "")
	pos, code, ok := parseArgs(env, flags, showUsage, args)
	if !ok {
		return code
	}
	switch len(pos) {
	case 0:
		a.target = "."
	case 1:
		a.target = pos[0]
	default:
		fmt.Fprintf(env.Stderr, "sbx show: expected at most one file, got %d arguments\n", len(pos))
		return ExitError
	}
	v := newView(env, a.noColor)

	info, err := os.Stat(a.target)
	if err != nil {
		v.errorf("Cannot show %s: %v", a.target, unwrapPathError(err))
		return ExitError
	}
	if info.IsDir() {
		return showState(env, v, a, a.target)
	}
	data, err := os.ReadFile(a.target)
	if err != nil {
		v.errorf("Cannot read %s: %v", a.target, unwrapPathError(err))
		return ExitError
	}
	switch kindOfFile(a.target, data) {
	case "lock":
		return showLock(env, v, a)
	case "state":
		return showStateFile(env, v, a)
	case "plan":
		return showPlan(env, v, a)
	}
	v.errorDetail(fmt.Sprintf("%s is not a plan, lock or state file", a.target),
		"sbx show reads files written by \"sbx plan -out FILE\", the lock file "+lockfiles.FileName+" and the state file "+filepath.Join(state.Dir, state.FileName)+".")
	return ExitError
}

// kindOfFile recognises a file sbx wrote: "lock", "state", "plan" or "".
func kindOfFile(name string, data []byte) string {
	if filepath.Base(name) == lockfiles.FileName || filepath.Ext(name) == ".hcl" {
		return "lock"
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return ""
	}
	_, hasLineage := probe["lineage"]
	_, hasResources := probe["resources"]
	_, hasChanges := probe["resource_changes"]
	switch {
	case hasChanges:
		return "plan"
	case hasLineage && hasResources:
		return "state"
	}
	return ""
}

func showPlan(env *Env, v *view, a showArgs) int {
	p, err := plan.ReadFile(a.target)
	if err != nil {
		v.errorf("Cannot read the plan: %v", err)
		return ExitError
	}
	if a.json {
		data, err := p.MarshalJSON()
		if err != nil {
			v.errorf("Cannot encode the plan as JSON: %v", err)
			return ExitError
		}
		env.Stdout.Write(append(data, '\n'))
		return ExitOK
	}
	if err := plan.Render(env.Stdout, p, plan.RenderOptions{Color: v.colorOut, Width: int(v.width)}); err != nil {
		v.errorf("Cannot print the plan: %v", err)
		return ExitError
	}
	return ExitOK
}

func showLock(env *Env, v *view, a showArgs) int {
	lock, diags := lockfiles.Read(a.target)
	if diags.HasErrors() {
		data, _ := os.ReadFile(a.target)
		v.diagnostics(lockSources(data, a.target), diags)
		return ExitError
	}
	if a.json {
		return writeJSON(env, v, lockJSON(lock))
	}
	w := env.Stdout
	names := sortedNames(lock.Images)
	if len(names) == 0 {
		fmt.Fprintf(w, "%s locks no images.\n", a.target)
		return ExitOK
	}
	for i, name := range names {
		img := lock.Images[name]
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (%s)\n", v.bold("image."+name), img.Platform)
		fmt.Fprintf(w, "  input_hash  %s\n", img.InputHash)
		for _, key := range sortedNames(img.Inputs) {
			pin := img.Inputs[key]
			fmt.Fprintf(w, "  %s\n      %s\n      %s\n", key, pin.Source, pinIdentity(pin))
		}
		for _, key := range sortedNames(img.Outputs) {
			fmt.Fprintf(w, "  output %s  %s\n", key, img.Outputs[key])
		}
	}
	return ExitOK
}

// lockJSON is the JSON form of a lock file shown by show -json.
func lockJSON(l *lockfiles.Lock) any {
	type pin struct {
		Source    string `json:"source"`
		Kind      string `json:"kind"`
		Digest    string `json:"digest,omitempty"`
		Manifest  string `json:"manifest,omitempty"`
		Version   string `json:"version,omitempty"`
		Integrity string `json:"integrity,omitempty"`
		SHA256    string `json:"sha256,omitempty"`
		Filename  string `json:"filename,omitempty"`
	}
	type image struct {
		Platform  string            `json:"platform"`
		InputHash string            `json:"input_hash"`
		Inputs    map[string]pin    `json:"inputs"`
		Outputs   map[string]string `json:"outputs,omitempty"`
	}
	out := struct {
		Images map[string]image `json:"images"`
	}{Images: map[string]image{}}
	for name, img := range l.Images {
		j := image{Platform: img.Platform, InputHash: img.InputHash, Inputs: map[string]pin{}, Outputs: img.Outputs}
		for key, p := range img.Inputs {
			j.Inputs[key] = pin(*p)
		}
		out.Images[name] = j
	}
	return out
}

// showState shows the state of the configuration directory dir.
func showState(env *Env, v *view, a showArgs, dir string) int {
	st, err := state.Load(dir)
	if err != nil {
		v.errorf("Cannot read the state: %v", err)
		return ExitError
	}
	if st.Lineage == "" && len(st.Resources) == 0 && !a.json {
		fmt.Fprintf(env.Stdout, "No state in %s: nothing has been applied there.\n", dir)
		return ExitOK
	}
	return printState(env, v, a, st)
}

// showStateFile shows a state file named directly. State is read from
// its configuration directory (the parent of .sbx), where package state
// keeps it.
func showStateFile(env *Env, v *view, a showArgs) int {
	abs, err := filepath.Abs(a.target)
	if err != nil {
		v.errorf("Cannot show %s: %v", a.target, err)
		return ExitError
	}
	if filepath.Base(abs) != state.FileName || filepath.Base(filepath.Dir(abs)) != state.Dir {
		v.errorDetail(fmt.Sprintf("Cannot show %s", a.target),
			fmt.Sprintf("State is read where sbx keeps it, DIR/%s/%s; name that file or the configuration directory DIR.", state.Dir, state.FileName))
		return ExitError
	}
	st, err := state.Load(filepath.Dir(filepath.Dir(abs)))
	if err != nil {
		v.errorf("Cannot read the state: %v", err)
		return ExitError
	}
	return printState(env, v, a, st)
}

func printState(env *Env, v *view, a showArgs, st *state.State) int {
	if a.json {
		data, err := state.Marshal(st)
		if err != nil {
			v.errorf("Cannot encode the state: %v", err)
			return ExitError
		}
		env.Stdout.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			fmt.Fprintln(env.Stdout)
		}
		return ExitOK
	}
	w := env.Stdout
	fmt.Fprintf(w, "State serial %d, lineage %s\n", st.Serial, st.Lineage)
	if len(st.Resources) == 0 {
		fmt.Fprintln(w, "\nNo resources.")
		return ExitOK
	}
	for _, r := range st.Resources {
		fmt.Fprintf(w, "\n%s\n", v.bold(r.Address))
		switch {
		case r.Image != nil:
			writeImageAttrs(w, r.Image)
		case r.Sandbox != nil:
			writeSandboxAttrs(w, r.Sandbox)
		}
	}
	return ExitOK
}

func writeImageAttrs(w io.Writer, a *state.ImageAttrs) {
	fmt.Fprintf(w, "  platform    %s\n", a.Platform)
	fmt.Fprintf(w, "  input_hash  %s\n", a.InputHash)
	for _, k := range sortedNames(a.Inputs) {
		fmt.Fprintf(w, "  input %s  %s\n", k, a.Inputs[k])
	}
	for _, k := range sortedNames(a.Outputs) {
		fmt.Fprintf(w, "  output %s  %s\n", k, a.Outputs[k])
	}
}

func writeSandboxAttrs(w io.Writer, a *state.SandboxAttrs) {
	fmt.Fprintf(w, "  image       image.%s (%s)\n", a.Image, a.ImageHash)
	fmt.Fprintf(w, "  cpus        %d\n", a.CPUs)
	fmt.Fprintf(w, "  memory      %s\n", lang.FormatSize(a.Memory))
	if a.User != "" {
		fmt.Fprintf(w, "  user        %s\n", a.User)
	}
	for _, k := range sortedNames(a.Env) {
		fmt.Fprintf(w, "  env %s = %q\n", k, a.Env[k])
	}
	fmt.Fprintf(w, "  policy_hash %s\n", a.PolicyHash)
	writePolicy(w, a.Policy)
}

// writePolicy lists a sandbox policy, one rule a line. Secret bindings
// show where the host reads the value, never the value.
func writePolicy(w io.Writer, p policy.Sandbox) {
	for _, r := range p.Allow {
		fmt.Fprintf(w, "  allow       %s  (%s)\n", r.Pattern, originText(r.Origin))
	}
	for _, r := range p.TCP {
		fmt.Fprintf(w, "  tcp         %s  (%s)\n", r.Dest, originText(r.Origin))
	}
	for _, r := range p.Hosts {
		fmt.Fprintf(w, "  host        %s = %s  (%s)\n", r.Name, r.Addr, originText(r.Origin))
	}
	for _, s := range p.Secrets {
		hosts := make([]string, len(s.Hosts))
		for i, h := range s.Hosts {
			hosts[i] = h.String()
		}
		fmt.Fprintf(w, "  secret      %s: $%s for %s, from %s  (%s)\n", s.Name, s.Env, strings.Join(hosts, ", "), s.Source, originText(s.Origin))
	}
	for _, m := range p.Mounts {
		fmt.Fprintf(w, "  mount       %s = %s (%s)", m.Guest, m.Host, m.Access)
		if len(m.Hide) > 0 {
			fmt.Fprintf(w, " hide %s", strings.Join(m.Hide, " "))
		}
		if len(m.ReadOnly) > 0 {
			fmt.Fprintf(w, " readonly %s", strings.Join(m.ReadOnly, " "))
		}
		if len(m.Tmpfs) > 0 {
			fmt.Fprintf(w, " tmpfs %s", strings.Join(m.Tmpfs, " "))
		}
		if m.Owner != "" {
			fmt.Fprintf(w, " owner %s", m.Owner)
		}
		fmt.Fprintf(w, "  (%s)\n", originText(m.Origin))
	}
}

func writeJSON(env *Env, v *view, x any) int {
	data, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		v.errorf("Cannot encode JSON: %v", err)
		return ExitError
	}
	env.Stdout.Write(append(data, '\n'))
	return ExitOK
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
