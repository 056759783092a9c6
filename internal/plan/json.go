package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/sbx-dev/sbx/internal/atomicfile"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// The JSON form of a plan, documented in docs/plan-json.md. Field names
// and meanings within one major format version only ever grow.
type jsonPlan struct {
	FormatVersion   string       `json:"format_version"`
	Against         string       `json:"against"`
	State           *jsonState   `json:"state"`
	Unlocked        []string     `json:"unlocked,omitempty"`
	ResourceChanges []jsonChange `json:"resource_changes"`
	Summary         Summary      `json:"summary"`
	// Mounts came after format 1.0 was first written: left out when
	// there are none, so older readers of such plans see no change.
	Mounts []MountReport `json:"mounts,omitempty"`
	// SecretSources came later still, left out the same way.
	SecretSources []SecretReport `json:"secret_sources,omitempty"`
}

type jsonState struct {
	Lineage string `json:"lineage"`
	Serial  uint64 `json:"serial"`
}

type jsonChange struct {
	Address    string          `json:"address"`
	Action     Action          `json:"action"`
	Reason     string          `json:"reason,omitempty"`
	Attributes []jsonAttr      `json:"attributes"`
	Policy     []policy.Change `json:"policy"`
	Before     *state.Resource `json:"before"`
	After      *state.Resource `json:"after"`
}

type jsonAttr struct {
	Path              string  `json:"path"`
	Before            *string `json:"before"`
	After             *string `json:"after"`
	ForcesReplacement bool    `json:"forces_replacement"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MarshalJSON renders the plan in the versioned JSON format described in
// docs/plan-json.md, indented. Every resource is listed, unchanged ones
// with action "no-op".
func (p *Plan) MarshalJSON() ([]byte, error) {
	jp := jsonPlan{
		FormatVersion:   FormatVersion,
		Against:         p.Against,
		Unlocked:        p.Unlocked,
		ResourceChanges: []jsonChange{},
		Summary:         p.Summary(),
		Mounts:          p.Mounts,
		SecretSources:   p.Secrets,
	}
	if p.StateLineage != "" {
		jp.State = &jsonState{Lineage: p.StateLineage, Serial: p.StateSerial}
	}
	for _, c := range p.Changes {
		jc := jsonChange{
			Address:    c.Addr.String(),
			Action:     c.Action,
			Reason:     c.Reason,
			Attributes: []jsonAttr{},
			Policy:     c.Policy,
			Before:     withAddress(c.Before),
			After:      withAddress(c.After),
		}
		if jc.Policy == nil {
			jc.Policy = []policy.Change{}
		}
		for _, a := range c.Attrs {
			jc.Attributes = append(jc.Attributes, jsonAttr{
				Path:              a.Path,
				Before:            optional(a.Before),
				After:             optional(a.After),
				ForcesReplacement: a.ForcesReplacement,
			})
		}
		jp.ResourceChanges = append(jp.ResourceChanges, jc)
	}
	return json.MarshalIndent(jp, "", "  ")
}

// withAddress returns r with Address filled in from Addr, copying r only
// when it has to.
func withAddress(r *state.Resource) *state.Resource {
	if r == nil || r.Addr.Name == "" || r.Address == r.Addr.String() {
		return r
	}
	c := *r
	c.Address = r.Addr.String()
	return &c
}

// UnmarshalJSON reads the JSON form strictly: the format version must be
// one this package writes, unknown fields are errors, and addresses and
// actions must be valid.
func (p *Plan) UnmarshalJSON(b []byte) error {
	var head struct {
		FormatVersion *string `json:"format_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("plan is not valid JSON: %v", err)
	}
	switch {
	case head.FormatVersion == nil:
		return fmt.Errorf("plan has no format_version; it was not written by sbx")
	case *head.FormatVersion != FormatVersion:
		return fmt.Errorf("plan has format_version %q; this sbx reads %q only", *head.FormatVersion, FormatVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var jp jsonPlan
	if err := dec.Decode(&jp); err != nil {
		return fmt.Errorf("invalid plan: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("invalid plan: data after the plan object")
	}
	out := Plan{Against: jp.Against, Unlocked: jp.Unlocked, Mounts: jp.Mounts, Secrets: jp.SecretSources}
	if jp.State != nil {
		out.StateLineage, out.StateSerial = jp.State.Lineage, jp.State.Serial
	}
	for i, jc := range jp.ResourceChanges {
		a, err := addrs.ParseRef(jc.Address)
		if err != nil {
			return fmt.Errorf("invalid plan: resource_changes[%d]: %v", i, err)
		}
		if !a.Kind.Managed() {
			return fmt.Errorf("invalid plan: resource_changes[%d]: %s is not an image or a sandbox", i, a)
		}
		switch jc.Action {
		case NoOp, Create, Update, Replace, Delete:
		default:
			return fmt.Errorf("invalid plan: resource_changes[%d] (%s): unknown action %q", i, a, jc.Action)
		}
		for _, r := range []*state.Resource{jc.Before, jc.After} {
			if r == nil {
				continue
			}
			if r.Address != jc.Address {
				return fmt.Errorf("invalid plan: resource_changes[%d]: before/after address %q differs from %q", i, r.Address, jc.Address)
			}
			r.Addr = a
		}
		// A delete may have no before: a sandbox the state does not
		// record (operation.NotInState).
		if (jc.Before == nil && jc.Action != Create && (jc.Action != Delete || a.Kind != addrs.Sandbox)) || (jc.After == nil && jc.Action != Delete) {
			return fmt.Errorf("invalid plan: resource_changes[%d] (%s): action %q needs both before and after", i, a, jc.Action)
		}
		rc := &ResourceChange{Addr: a, Action: jc.Action, Reason: jc.Reason, Policy: jc.Policy, Before: jc.Before, After: jc.After}
		if len(rc.Policy) == 0 {
			rc.Policy = nil
		}
		for _, ja := range jc.Attributes {
			rc.Attrs = append(rc.Attrs, AttrChange{Path: ja.Path, Before: deref(ja.Before), After: deref(ja.After), ForcesReplacement: ja.ForcesReplacement})
		}
		out.Changes = append(out.Changes, rc)
	}
	if got := out.Summary(); got != jp.Summary {
		return fmt.Errorf("invalid plan: summary %+v does not match its resource changes (%+v)", jp.Summary, got)
	}
	*p = out
	return nil
}

// WriteFile saves the plan as JSON at path, atomically: the file is
// written beside path, synced and renamed over it, so path holds either
// the old content or the whole plan, and nothing is left behind on error.
// The file's mode is 0600, as the state's is: it holds the same records.
func WriteFile(path string, p *Plan) error {
	b, err := p.MarshalJSON()
	if err != nil {
		return fmt.Errorf("writing plan %s: %v", path, err)
	}
	b = append(b, '\n')
	if err := atomicfile.WriteBytes(path, b, 0o600); err != nil {
		return fmt.Errorf("saving plan: %v", err)
	}
	return nil
}

// maxPlanFile bounds the saved plan ReadFile reads.
const maxPlanFile = 64 << 20

// ReadFile reads a plan saved by WriteFile. It refuses a plan of another
// format version or with fields this version does not know.
func ReadFile(path string) (*Plan, error) {
	// Read as lang reads spec files (no named pipe, device or link out
	// of the plan's directory), capped: a plan is small.
	b, err := lang.ReadFileLimit(filepath.Dir(path), filepath.Base(path), maxPlanFile)
	if err != nil {
		return nil, fmt.Errorf("reading plan: %v", err)
	}
	var p Plan
	if err := p.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("reading plan %s: %v", path, err)
	}
	return &p, nil
}
