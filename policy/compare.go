package policy

// Direction classifies a policy change.
type Direction string

// Directions of a policy change.
const (
	// Widen: the sandbox may do something it could not before.
	Widen Direction = "widen"
	// Narrow: the sandbox may no longer do something it could.
	Narrow Direction = "narrow"
	// Neutral: a change that neither widens nor narrows (e.g. a mount's
	// owner or a secret's env name).
	Neutral Direction = "neutral"
)

// Change is one classified difference between two policies.
type Change struct {
	Direction Direction `json:"direction"`
	// Kind is the rule kind: "allow", "tcp", "hosts", "secret",
	// "secret.hosts", "mount", "mount.access", "mount.hide",
	// "mount.readonly", "mount.tmpfs", "mount.host", "mount.owner".
	Kind string `json:"kind"`
	// Subject is what changed, e.g. "api.example.com" or "/workspace".
	Subject string `json:"subject"`
	// Detail is a short human sentence, e.g. `hide rule ".env" removed
	// from /workspace`.
	Detail string `json:"detail"`
	// Origin is where the new (or, for removals, old) rule is declared.
	Origin Origin `json:"origin"`
}
