package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/internal/termtext"
)

const outputUsage = `
Usage: sbx output [options] [DIR] [NAME]

  Show the values of the configuration's output blocks as the last
  successful "sbx apply" in DIR (default: the current directory) recorded
  them in its state (.sbx/state.json), as Terraform's "output" does: every
  output as NAME = value, sorted, with the value of a sensitive one
  hidden, or the value of the output NAME alone, sensitive or not.

  The configuration is not read: an output added or changed since shows
  after the next apply, and "sbx destroy" of every sandbox removes them.

Options:

  -json               Print JSON: an object of every output's value and
                      whether it is sensitive, or NAME's value alone.
  -raw                Print NAME's value as it is, with no quotes and no
                      newline, for scripts: a string, number or bool only.

Exit status: 0 shown (or no outputs recorded), 1 an error or no output NAME.
`

func runOutput(_ context.Context, env *Env, args []string) int {
	var asJSON, raw bool
	flags := newFlagSet("output")
	flags.BoolVar(&asJSON, "json", false, "")
	flags.BoolVar(&raw, "raw", false, "")
	pos, code, ok := parseArgs(env, flags, outputUsage, args)
	if !ok {
		return code
	}
	dir, names := splitDirNames(pos)
	if len(names) > 1 {
		usageError(env, "output", "Invalid arguments", fmt.Sprintf("sbx output takes [DIR] [NAME]; got %s", quoteText(strings.Join(pos, " "))))
		return ExitError
	}
	if raw && (asJSON || len(names) == 0) {
		usageError(env, "output", "Invalid -raw", "-raw prints one output's value: name it, and leave out -json.")
		return ExitError
	}
	v := newView(env, false)
	st, err := state.Load(dir)
	if err != nil {
		v.errorDetail("Cannot read the state", err.Error())
		return ExitError
	}
	if len(names) == 0 {
		if asJSON {
			type jsonOutput struct {
				Value     json.RawMessage `json:"value"`
				Sensitive bool            `json:"sensitive"`
			}
			all := map[string]jsonOutput{}
			for name, o := range st.Outputs {
				all[name] = jsonOutput{o.Value, o.Sensitive}
			}
			return writeJSON(env, v, all)
		}
		if len(st.Outputs) == 0 {
			fmt.Fprintf(env.Stderr, "No outputs: the state of %s records none. \"sbx apply\" records the configuration's output blocks.\n", dir)
			return ExitOK
		}
		writeOutputs(env.Stdout, st.Outputs)
		return ExitOK
	}
	name := strings.TrimPrefix(names[0], "output.")
	o, ok := st.Outputs[name]
	if !ok {
		detail := fmt.Sprintf("The state of %s records no output %q.", dir, name)
		if len(st.Outputs) > 0 {
			detail += " It records: " + strings.Join(slices.Sorted(maps.Keys(st.Outputs)), ", ") + "."
		}
		v.errorDetail("No such output", termtext.Line(detail)+" \"sbx apply\" records the configuration's output blocks.")
		return ExitError
	}
	switch {
	case asJSON:
		var b bytes.Buffer
		if err := json.Indent(&b, o.Value, "", "  "); err != nil {
			v.errorf("Cannot print output %s: %v", name, err)
			return ExitError
		}
		b.WriteByte('\n')
		env.Stdout.Write(b.Bytes())
	case raw:
		s, ok := rawValue(o.Value)
		if !ok {
			v.errorDetail("Not a plain value", fmt.Sprintf("Output %s is a list, a map or null; -raw prints only a string, a number or a bool. Use -json.", name))
			return ExitError
		}
		io.WriteString(env.Stdout, s)
	default:
		fmt.Fprintln(env.Stdout, formatValue(o.Value, ""))
	}
	return ExitOK
}

// writeOutputs prints outputs as NAME = value, sorted by name, a
// sensitive one's value as <sensitive>.
func writeOutputs(w io.Writer, outs map[string]*state.Output) {
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		o := outs[name]
		val := "<sensitive>"
		if !o.Sensitive {
			val = formatValue(o.Value, "")
		}
		fmt.Fprintf(w, "%s = %s\n", name, val)
	}
}

// formatValue renders a JSON value as HCL writes it: strings quoted
// (control characters escaped, so a value cannot move the terminal's
// cursor), lists and maps one element a line indented under indent, map
// keys sorted.
func formatValue(raw json.RawMessage, indent string) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return termtext.Line(string(raw))
	}
	var b strings.Builder
	writeValue(&b, v, indent)
	return b.String()
}

func writeValue(b *strings.Builder, v any, indent string) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(strconv.Quote(v))
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for _, e := range v {
			b.WriteString(indent + "  ")
			writeValue(b, e, indent+"  ")
			b.WriteString(",\n")
		}
		b.WriteString(indent + "]")
	case map[string]any:
		if len(v) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for _, k := range slices.Sorted(maps.Keys(v)) {
			b.WriteString(indent + "  " + strconv.Quote(k) + " = ")
			writeValue(b, v[k], indent+"  ")
			b.WriteString("\n")
		}
		b.WriteString(indent + "}")
	}
}

// rawValue is a string, number or bool value as -raw prints it.
func rawValue(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}
