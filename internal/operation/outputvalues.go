package operation

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
)

// SpecOutputs evaluates cfg's output blocks as the state records them.
// lang evaluated each value when it loaded the configuration.
func SpecOutputs(cfg *lang.Config) (map[string]*state.Output, error) {
	if len(cfg.Outputs) == 0 {
		return nil, nil
	}
	out := make(map[string]*state.Output, len(cfg.Outputs))
	for name, o := range cfg.Outputs {
		data, err := json.Marshal(o.Value)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		out[name] = &state.Output{Value: data, Sensitive: o.Sensitive}
	}
	return out, nil
}

// recordOutputs saves cfg's outputs in st after an apply, when they
// differ from what it records, and shows them (Hooks.Outputs).
func recordOutputs(save func(*state.State) error, st *state.State, cfg *lang.Config, h Hooks) diags.Diagnostics {
	outs, err := SpecOutputs(cfg)
	if err != nil {
		return diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot record the outputs", err.Error())}
	}
	if !SameOutputs(st.Outputs, outs) {
		st.Outputs = outs
		if err := save(st); err != nil {
			return diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot record the outputs in the state", err.Error())}
		}
	}
	if len(outs) > 0 {
		h.Outputs(outs)
	}
	return nil
}

// clearOutputs removes the outputs from a state that records no
// resource any more, as a destroy of everything leaves it.
func clearOutputs(save func(*state.State) error, st *state.State) diags.Diagnostics {
	if len(st.Resources) > 0 || len(st.Outputs) == 0 {
		return nil
	}
	st.Outputs = nil
	if err := save(st); err != nil {
		return diags.Diagnostics{diags.Sourceless(diags.Error, "Cannot remove the outputs from the state", err.Error())}
	}
	return nil
}

// SameOutputs reports whether a and b hold the same values, whatever
// their JSON's spacing (the state file holds them indented).
func SameOutputs(a, b map[string]*state.Output) bool {
	if len(a) != len(b) {
		return false
	}
	for name, x := range a {
		y, ok := b[name]
		if !ok || x.Sensitive != y.Sensitive || !sameJSON(x.Value, y.Value) {
			return false
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}
