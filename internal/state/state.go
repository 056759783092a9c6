package state

import (
	"encoding/json"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/policy"
)

// FormatVersion is the version of the state file format this package writes.
const FormatVersion = 1

// Dir is the directory, relative to the configuration directory, that holds
// state and its lock.
const Dir = ".sbx"

// FileName is the state file's name inside Dir.
const FileName = "state.json"

// BackupFileName is the name, inside Dir, of the copy of the state as it
// was before the last save (Lease.Save writes it, as Terraform keeps
// terraform.tfstate.backup): the way back when the state file itself is
// lost or corrupt.
const BackupFileName = FileName + ".backup"

// State is the content of a state file.
type State struct {
	FormatVersion int    `json:"format_version"`
	Lineage       string `json:"lineage"`
	Serial        uint64 `json:"serial"`
	// Resources are sorted by address (addrs.Ref.Less).
	Resources []*Resource `json:"resources"`
	// Outputs are the values of the configuration's output blocks as
	// the last apply evaluated them, by name; what "sbx output" shows.
	Outputs map[string]*Output `json:"outputs,omitempty"`
}

// Output is one output block's value as apply recorded it.
type Output struct {
	// Value is the value as JSON.
	Value json.RawMessage `json:"value"`
	// Sensitive outputs are shown only when asked for by name.
	Sensitive bool `json:"sensitive,omitempty"`
}

// Resource is one materialized resource. Exactly one of Image and Sandbox is
// set, matching Addr.Kind.
type Resource struct {
	Addr    addrs.Ref     `json:"-"`
	Address string        `json:"address"` // Addr.String(), the serialized form
	Image   *ImageAttrs   `json:"image,omitempty"`
	Sandbox *SandboxAttrs `json:"sandbox,omitempty"`
}

// ImageAttrs are the last-applied attributes of an image.
type ImageAttrs struct {
	Platform  string `json:"platform"`
	InputHash string `json:"input_hash"`
	// ProvisionHash is the hash of the image's provision steps
	// (recipe.ProvisionHash); empty for an image without any.
	ProvisionHash string `json:"provision_hash,omitempty"`
	// Inputs maps each recipe input key ("base", "artifact.claude") to
	// the source it was built from, for showing what changed.
	Inputs  map[string]string `json:"inputs,omitempty"`
	Outputs map[string]string `json:"outputs,omitempty"`
}

// SandboxAttrs are the last-applied attributes of a sandbox. Image, CPUs,
// Memory, User, Env and ImageHash force replacement when they change; the
// policy applies in place.
type SandboxAttrs struct {
	Image      string            `json:"image"`      // image block name
	ImageHash  string            `json:"image_hash"` // that image's recipe.ImageHash
	CPUs       int               `json:"cpus"`
	Memory     int64             `json:"memory"`
	User       string            `json:"user,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Policy     policy.Sandbox    `json:"policy"`
	PolicyHash string            `json:"policy_hash"`
	// ImageEnv is the environment of the sandbox's image, which the
	// commands run in the sandbox get before Env. It is part of the
	// image's input hash, so it takes part in no diff of its own.
	ImageEnv map[string]string `json:"image_env,omitempty"`
	// Mounts are the owners of Policy.Mounts as numbers, one per mount
	// in the policy's order: the mount's owner (the sandbox's user when
	// it names none) as a uid and gid of the image's users. They follow
	// from the policy and the image's users, which the input hash
	// covers, so they take part in no diff of their own. Both came after
	// the state format was first written: a state without them plans as
	// it did, and apply starts a sandbox from a plan's desired
	// attributes, which always have them.
	Mounts []MountOwner `json:"mounts,omitempty"`
	// Runtime is where the sandbox runs, recorded by apply; nil in the
	// desired resources of a plan and in states written by plan-only
	// tools. It never takes part in a diff.
	Runtime *Runtime `json:"runtime,omitempty"`
}

// MountOwner is who owns the files of one workspace mount in the guest.
type MountOwner struct {
	// Guest is the mount's guest path (policy.Mount.Guest).
	Guest string `json:"guest"`
	// UID and GID are the owner's ids in the image.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Runtime is a running sandbox's host side: its supervisor process, the
// supervisor's directory (sockets, status and logs) and QEMU.
type Runtime struct {
	// Dir is the supervisor's directory.
	Dir string `json:"dir"`
	// Pid is the supervisor's process id, QEMUPid the machine's.
	Pid     int `json:"pid"`
	QEMUPid int `json:"qemu_pid,omitempty"`
	// Accel is the accelerator the machine runs under.
	Accel string `json:"accel,omitempty"`
	// Started is when apply started the sandbox (RFC 3339, UTC).
	Started string `json:"started,omitempty"`
	// Gone, set when state is refreshed against the running processes,
	// says why the sandbox no longer runs ("its supervisor (pid 41) has
	// exited"); empty means it was found running, or not checked.
	Gone string `json:"gone,omitempty"`
	// Unhealthy, set with Gone, says that the sandbox's supervisor runs
	// but its guest agent does not answer, so it cannot run commands
	// ("its guest agent did not answer a ping within 10s"); a plan
	// replaces it as one that is gone.
	Unhealthy string `json:"unhealthy,omitempty"`
}

// Lookup returns the resource at addr, or nil.
func (s *State) Lookup(addr addrs.Ref) *Resource {
	if s == nil {
		return nil
	}
	for _, r := range s.Resources {
		if r.Addr == addr {
			return r
		}
	}
	return nil
}
