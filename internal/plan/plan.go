package plan

import (
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/policy"
)

// FormatVersion is the version of the plan JSON format.
const FormatVersion = "1.0"

// Action is what happens to one resource.
type Action string

// Actions, with the symbols plans show them with.
const (
	NoOp    Action = "no-op"   // (not shown)
	Create  Action = "create"  // +
	Update  Action = "update"  // ~  in place, no restart
	Replace Action = "replace" // -/+
	Delete  Action = "delete"  // -
)

// Symbol returns the Terraform-style marker for the action.
func (a Action) Symbol() string {
	switch a {
	case Create:
		return "+"
	case Update:
		return "~"
	case Replace:
		return "-/+"
	case Delete:
		return "-"
	}
	return " "
}

// Plan is the result of planning.
type Plan struct {
	// Changes lists every resource in desired or prior, sorted by address;
	// unchanged resources have Action NoOp.
	Changes []*ResourceChange
	// Against names what the desired configuration was compared with:
	// "state" or the other revision's directory or git revision.
	Against string
	// StateLineage and StateSerial identify the state the plan was made
	// against (empty for -against plans), so a saved plan can be refused
	// when the state has moved on.
	StateLineage string
	StateSerial  uint64
	// Unlocked names the sides of an Against plan that have no lock file
	// ("this configuration" or the other revision's label): their image
	// inputs were compared by source string, not by pin (AgainstSides).
	Unlocked []string
	// Mounts say, for each mount of the desired sandboxes, which host
	// files its hide rules hide and which visible files look like
	// secrets (InspectMounts). They describe the checkout when the plan
	// was made, not a change: apply inspects again rather than compare
	// them with a saved plan's.
	Mounts []MountReport
	// Secrets say, for each secret of the desired sandboxes, where this
	// host reads its value (SecretSources): the spec's source or the
	// user's binding. Like Mounts they describe the host when the plan
	// was made, not a change, and apply chooses again rather than
	// compare them with a saved plan's.
	Secrets []SecretReport
}

// ResourceChange is the planned change to one resource.
type ResourceChange struct {
	Addr   addrs.Ref
	Action Action
	// Attrs are the attribute differences, in a fixed order.
	Attrs []AttrChange
	// Policy are the policy differences of a sandbox, classified.
	Policy []policy.Change
	// Reason says why a sandbox is replaced or re-created (e.g. "image
	// image.agent is replaced", "sandbox is not running").
	Reason string
	// Before and After are the attributes before and after; Before is nil
	// on create, After nil on delete. Exactly one kind (Image/Sandbox)
	// is set in each.
	Before *state.Resource
	After  *state.Resource
}

// AttrChange is one attribute difference.
type AttrChange struct {
	Path   string // "cpus", "image", "env.FOO", "input_hash"
	Before string // rendered value; "" when absent
	After  string
	// ForcesReplacement is set when this change alone means the sandbox
	// (or image) must be replaced rather than updated in place.
	ForcesReplacement bool
}
