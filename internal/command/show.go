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

	"github.com/sbx-dev/sbx/internal/build/image"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

const showUsage = `
Usage: sbx show [options] [FILE|DIR]

  Show a saved plan (from "sbx plan -out FILE"), a lock file
  (sbx.lock.hcl), a state file (.sbx/state.json) or a built image's
  image.json (from "sbx build -o DIR"): its outputs and its inventory,
  the packages installed and the executables checked. The kind is recognised
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
		newView(env, a.noColor).usageError("show", "Invalid arguments", fmt.Sprintf("sbx show takes at most one file; got %d arguments: %s", len(pos), quoteText(strings.Join(pos, " "))))
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
	// The file may be a checkout's: read it as lang reads spec files
	// (no named pipe, device or link out of its directory), capped.
	data, err := lang.ReadFileLimit(filepath.Dir(a.target), filepath.Base(a.target), maxShownFile)
	if err != nil {
		v.errorf("Cannot show %s: %v", a.target, err)
		return ExitError
	}
	switch kindOfFile(a.target, data) {
	case "lock":
		return showLock(env, v, a)
	case "state":
		return showStateFile(env, v, a)
	case "plan":
		return showPlan(env, v, a)
	case "image":
		return showImage(env, v, a)
	}
	v.errorDetail(fmt.Sprintf("%s is not a plan, lock, state or image file", a.target),
		"sbx show reads files written by \"sbx plan -out FILE\", the lock file "+lockfiles.FileName+", the state file "+filepath.Join(state.Dir, state.FileName)+" and a built image's image.json.")
	return ExitError
}

// maxShownFile bounds the files show reads: lock files are at most 64
// MiB (lockfiles), and plans and state are smaller.
const maxShownFile = 64 << 20

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
	_, hasBuildKey := probe["buildKey"]
	_, hasOutputs := probe["outputs"]
	switch {
	case hasChanges:
		return "plan"
	case hasBuildKey && hasOutputs:
		return "image"
	case hasLineage && hasResources:
		return "state"
	}
	return ""
}

// showImage shows a built image's image.json: what it is, its outputs
// and its inventory.
func showImage(env *Env, v *view, a showArgs) int {
	m, err := image.ReadManifest(a.target)
	if err != nil {
		v.errorf("Cannot read the image manifest: %v", err)
		return ExitError
	}
	if a.json {
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			v.errorf("Cannot encode the manifest as JSON: %v", err)
			return ExitError
		}
		env.Stdout.Write(append(data, '\n'))
		return ExitOK
	}
	q := termtext.Line
	w := env.Stdout
	fmt.Fprintf(w, "image.%s  %s  kernel %s\n", q(m.Image), q(m.Platform), q(m.KernelVersion))
	fmt.Fprintf(w, "  input hash  %s\n  build key   %s\n", q(m.InputHash), q(m.BuildKey))
	for _, name := range sortedNames(m.Outputs) {
		o := m.Outputs[name]
		fmt.Fprintf(w, "  output %-10s %s  %s\n", q(name), q(o.File), q(o.Digest))
	}
	if len(m.Packages) > 0 {
		fmt.Fprintf(w, "  packages (%d)\n", len(m.Packages))
		for _, p := range m.Packages {
			fmt.Fprintf(w, "    %s %s %s\n", q(p.Name), q(p.Version), q(p.Architecture))
		}
	}
	if len(m.Executables) > 0 {
		fmt.Fprintf(w, "  executables (%d)\n", len(m.Executables))
		for _, e := range m.Executables {
			fmt.Fprintf(w, "    %s  %s\n", q(e.Name), q(e.Path))
		}
	}
	return ExitOK
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
		data, _ := lockfiles.ReadFile(a.target) // never through a link out of its directory
		v.diagnostics(operation.LockSources(data, a.target), diags)
		return ExitError
	}
	if a.json {
		return writeJSON(env, v, lockJSON(lock))
	}
	w := lines{env.Stdout}
	names := sortedNames(lock.Images)
	if len(names) == 0 {
		w.printf("%s locks no images.", a.target)
		return ExitOK
	}
	for i, name := range names {
		img := lock.Images[name]
		if i > 0 {
			w.printf("")
		}
		fmt.Fprintf(env.Stdout, "%s (%s)\n", v.bold(termtext.Line("image."+name)), termtext.Line(img.Platform))
		w.printf("  input_hash  %s", img.InputHash)
		for _, key := range sortedNames(img.Inputs) {
			pin := img.Inputs[key]
			w.printf("  %s", key)
			w.printf("      %s", pin.Source)
			w.printf("      %s", operation.PinIdentity(pin))
		}
		for _, key := range sortedNames(img.Outputs) {
			w.printf("  output %s  %s", key, img.Outputs[key])
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
		// Architecture and Size are set for deb-package pins only.
		Architecture string `json:"architecture,omitempty"`
		Size         string `json:"size,omitempty"`
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
	w := lines{env.Stdout}
	w.printf("State serial %d, lineage %s", st.Serial, st.Lineage)
	if len(st.Resources) == 0 {
		w.printf("")
		w.printf("No resources.")
		return ExitOK
	}
	for _, r := range st.Resources {
		fmt.Fprintf(env.Stdout, "\n%s\n", v.bold(termtext.Line(r.Address)))
		switch {
		case r.Image != nil:
			writeImageAttrs(w, r.Image)
		case r.Sandbox != nil:
			writeSandboxAttrs(w, r.Sandbox)
		}
	}
	return ExitOK
}

func writeImageAttrs(w lines, a *state.ImageAttrs) {
	w.printf("  platform    %s", a.Platform)
	w.printf("  input_hash  %s", a.InputHash)
	for _, k := range sortedNames(a.Inputs) {
		w.printf("  input %s  %s", k, a.Inputs[k])
	}
	for _, k := range sortedNames(a.Outputs) {
		w.printf("  output %s  %s", k, a.Outputs[k])
	}
}

func writeSandboxAttrs(w lines, a *state.SandboxAttrs) {
	w.printf("  image       image.%s (%s)", a.Image, a.ImageHash)
	w.printf("  cpus        %d", a.CPUs)
	w.printf("  memory      %s", lang.FormatSize(a.Memory))
	if a.User != "" {
		w.printf("  user        %s", a.User)
	}
	for _, k := range sortedNames(a.Env) {
		w.printf("  env %s = %q", k, a.Env[k])
	}
	w.printf("  policy_hash %s", a.PolicyHash)
	writePolicy(w, a.Policy)
}

// writePolicy lists a sandbox policy, one rule a line. Secret bindings
// show where the host reads the value, never the value.
func writePolicy(w lines, p policy.Sandbox) {
	for _, r := range p.Allow {
		w.printf("  allow       %s  (%s)", r.Pattern, originText(r.Origin))
	}
	for _, r := range p.TCP {
		w.printf("  tcp         %s  (%s)", r.Dest, originText(r.Origin))
	}
	for _, r := range p.Hosts {
		w.printf("  host        %s = %s  (%s)", r.Name, r.Addr, originText(r.Origin))
	}
	for _, s := range p.Secrets {
		hosts := make([]string, len(s.Hosts))
		for i, h := range s.Hosts {
			hosts[i] = h.String()
		}
		var places string
		if len(s.Headers) > 0 {
			places += ", in " + strings.Join(s.Headers, ", ")
		}
		if len(s.PlainHTTP) > 0 {
			plain := make([]string, len(s.PlainHTTP))
			for i, hp := range s.PlainHTTP {
				plain[i] = hp.String()
			}
			places += ", plain HTTP to " + strings.Join(plain, ", ")
		}
		w.printf("  secret      %s: $%s for %s%s, from %s  (%s)", s.Name, s.Env, strings.Join(hosts, ", "), places, s.Source, originText(s.Origin))
	}
	for _, m := range p.Mounts {
		var b strings.Builder
		fmt.Fprintf(&b, "  mount       %s = %s (%s)", m.Guest, m.Host, m.Access)
		if len(m.Hide) > 0 {
			fmt.Fprintf(&b, " hide %s", strings.Join(m.Hide, " "))
		}
		if len(m.ReadOnly) > 0 {
			fmt.Fprintf(&b, " readonly %s", strings.Join(m.ReadOnly, " "))
		}
		if len(m.Tmpfs) > 0 {
			fmt.Fprintf(&b, " tmpfs %s", strings.Join(m.Tmpfs, " "))
		}
		if m.GitWritable {
			b.WriteString(" git_metadata writable")
		}
		if m.Owner != "" {
			fmt.Fprintf(&b, " owner %s", m.Owner)
		}
		w.printf("%s  (%s)", b.String(), originText(m.Origin))
	}
}

// lines prints what a checkout's files hold (the state, the lock), one
// line at a time, each escaped to that one line (package termtext): a
// value cannot drive the terminal or pass for a line of its own.
type lines struct{ w io.Writer }

func (l lines) printf(format string, args ...any) {
	io.WriteString(l.w, termtext.Line(fmt.Sprintf(format, args...))+"\n")
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
