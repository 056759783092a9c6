package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// Desired computes the resources cfg asks for, using lock for the pins of
// every image input: one image.NAME per image block (platform, input hash,
// input sources) and one sandbox.NAME per sandbox block (image, image
// hash, CPUs, memory, user, environment and effective policy with its
// hash, and what a started sandbox takes from its image: the image's
// environment and each mount's owner as numbers). The result is sorted
// by address. A sandbox's attributes are all its started spec holds but
// the configuration directory, the host directories made absolute, the
// built image's files and the secrets' values (pipeline.PlannedSpec).
//
// An image with no lock entry, or whose lock entry no longer matches the
// spec, is an error (recipe.CheckLocked) at the image block or the source
// concerned telling the user to run `sbx lock`; that image and its
// sandboxes are then left out of the result. Lock entries for images the
// configuration no longer declares are ignored: planning does not need
// them, and the next `sbx lock` drops them. A nil cfg wants nothing; a nil
// lock locks nothing.
func Desired(cfg *lang.Config, lock *lockfiles.Lock) ([]*state.Resource, hcl.Diagnostics) {
	if cfg == nil {
		return nil, nil
	}
	used := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	for name := range cfg.Images {
		if l := lock.Lookup(name); l != nil {
			used.Images[name] = l
		}
	}
	diags := recipe.CheckLocked(cfg, used)

	var out []*state.Resource
	hashes := map[string]string{}
	for _, name := range sortedNames(cfg.Images) {
		img := cfg.Images[name]
		locked := used.Lookup(name)
		if diags.HasErrors() && recipe.CheckImageLocked(img, locked) != nil {
			continue // reported by CheckLocked
		}
		r, err := desiredImage(img, locked)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot compute the image's input hash",
				Detail:   fmt.Sprintf("%s: %v. Run `sbx lock` to update %s.", img.Addr(), err, lockfiles.FileName),
				Subject:  img.DeclRange.Ptr(),
			})
			continue
		}
		hashes[name] = recipe.ImageHash(r.Image.InputHash, r.Image.ProvisionHash)
		out = append(out, r)
	}
	for _, name := range sortedNames(cfg.Sandboxes) {
		sb := cfg.Sandboxes[name]
		hash, ok := hashes[sb.Image]
		if !ok {
			// The image is missing from the configuration (lang reports
			// that) or could not be planned (reported above).
			continue
		}
		env := copyEnv(sb.Env)
		img := cfg.Images[sb.Image]
		owners, err := mountOwners(img, sb)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown mount owner",
				Detail:   fmt.Sprintf("%s: %v.", sb.Addr(), err),
				Subject:  sb.DeclRange.Ptr(),
			})
			continue
		}
		out = append(out, &state.Resource{
			Addr:    sb.Addr(),
			Address: sb.Addr().String(),
			Sandbox: &state.SandboxAttrs{
				Image:      sb.Image,
				ImageHash:  hash,
				CPUs:       sb.CPUs,
				Memory:     sb.Memory,
				User:       sb.User,
				Env:        env,
				Policy:     sb.Policy,
				PolicyHash: policy.Hash(sb.Policy),
				ImageEnv:   copyEnv(img.Env),
				Mounts:     owners,
			},
		})
	}
	return out, diags
}

// copyEnv returns a copy of env, nil when it is empty.
func copyEnv(env map[string]string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	return maps.Clone(env)
}

// mountOwners returns the owner of each of sb's mounts as numbers: the
// mount's owner, or the sandbox's user when it names none, looked up in
// img's users; "" and "root" are uid and gid 0. An owner that is not a
// user of img is an error (lang reports it where the owner is set).
func mountOwners(img *lang.Image, sb *lang.Sandbox) ([]state.MountOwner, error) {
	var out []state.MountOwner
	for _, m := range sb.Policy.Mounts {
		name := m.Owner
		if name == "" {
			name = sb.User
		}
		o := state.MountOwner{Guest: m.Guest}
		if name != "" && name != "root" {
			i := slices.IndexFunc(img.Users, func(u *lang.User) bool { return u.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("the owner %q of mount %s is not a user of %s", name, m.Guest, img.Addr())
			}
			o.UID, o.GID = uint32(img.Users[i].UID), uint32(img.Users[i].GID)
		}
		out = append(out, o)
	}
	return out, nil
}

func desiredImage(img *lang.Image, locked *lockfiles.Image) (*state.Resource, error) {
	if locked == nil {
		return nil, fmt.Errorf("%s is not locked", img.Addr())
	}
	hash, err := recipe.InputHash(img, locked.Inputs)
	if err != nil {
		return nil, err
	}
	inputs := map[string]string{}
	for _, in := range recipe.Inputs(img) {
		inputs[in.Key] = in.Source.Raw
	}
	packageInputs(inputs, locked)
	if len(inputs) == 0 {
		inputs = nil
	}
	return &state.Resource{
		Addr:    img.Addr(),
		Address: img.Addr().String(),
		Image: &state.ImageAttrs{
			Platform:      img.Platform.String(),
			InputHash:     hash,
			ProvisionHash: recipe.ProvisionHash(img),
			Inputs:        inputs,
		},
	}, nil
}

func sortedNames[T any](m map[string]T) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FromState plans desired resources (from Desired) against the
// last-applied state st (nil for a directory that was never applied): it
// is Compute against the state's resources, recording the state's lineage
// and serial so that a saved plan can be refused once the state has moved
// on.
func FromState(desired []*state.Resource, st *state.State) *Plan {
	var prior []*state.Resource
	var lineage string
	var serial uint64
	if st != nil {
		prior, lineage, serial = st.Resources, st.Lineage, st.Serial
	}
	p := Compute(desired, prior)
	p.Against, p.StateLineage, p.StateSerial = "state", lineage, serial
	return p
}

// Against plans one revision of a configuration against another without
// any state, for code review: the resources desiredCfg asks for are
// compared with those otherCfg asks for, each with its own lock. label
// names the other revision in the plan (a directory or a git revision);
// empty means otherCfg.Dir. A nil otherCfg is an empty configuration (the
// revision before the spec existed). The plan is nil when either side has
// errors. Checking a revision out is the caller's job.
func Against(desiredCfg *lang.Config, desiredLock *lockfiles.Lock, otherCfg *lang.Config, otherLock *lockfiles.Lock, label string) (*Plan, hcl.Diagnostics) {
	return AgainstSides(Side{Config: desiredCfg, Lock: desiredLock}, Side{Config: otherCfg, Lock: otherLock}, label)
}

// Side is one revision of a configuration in a plan made with
// AgainstSides.
type Side struct {
	Config *lang.Config // nil: an empty configuration
	Lock   *lockfiles.Lock
	// Unlocked says the revision has no lock file, so its image inputs
	// are not pinned; Lock is then ignored.
	Unlocked bool
	// Label names the revision in the plan's notes when it is unlocked;
	// empty means "this configuration" for the desired side and the
	// plan's label for the other.
	Label string
}

// AgainstSides is Against for revisions either of which may have no lock
// file (Side.Unlocked).
//
// When both sides are locked it is Against. When either is unlocked,
// image inputs cannot be compared by what they pin, so both sides are
// compared by their specs alone: each image's input hash is computed with
// every input's source string (and declared sha256) standing in for its
// pin. An image is then replaced when its recipe or a source string
// changes, and its sandboxes with it, as with pins; content that one
// source string resolves to differently on the two sides (a moved tag, a
// new version in a range) is not seen. Every sandbox change and policy
// change is computed as usual. The stand-in hashes are not real input
// hashes, so the plan leaves them out: no input_hash or image_hash
// attribute changes are listed and the resources' before and after carry
// none. Plan.Unlocked names the unlocked sides.
func AgainstSides(desired, other Side, label string) (*Plan, hcl.Diagnostics) {
	if label == "" {
		label = "an empty configuration"
		if other.Config != nil {
			label = other.Config.Dir
		}
	}
	unlocked := desired.Unlocked || other.Unlocked
	desiredLock, otherLock := desired.Lock, other.Lock
	if unlocked {
		desiredLock, otherLock = sourceLock(desired.Config), sourceLock(other.Config)
	}
	want, diags := Desired(desired.Config, desiredLock)
	prior, otherDiags := Desired(other.Config, otherLock)
	diags = append(diags, otherDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	p := Compute(want, prior)
	p.Against = label
	if unlocked {
		stripHashes(p)
		if desired.Unlocked {
			p.Unlocked = append(p.Unlocked, orDefault(desired.Label, "this configuration"))
		}
		if other.Unlocked && other.Config != nil {
			p.Unlocked = append(p.Unlocked, orDefault(other.Label, label))
		}
	}
	return p, diags
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sourceLock returns a lock for cfg whose pins are the source strings
// themselves: each input is "pinned" to its source string (as a version)
// and declared sha256, an image's package set to its list of requested
// packages, and each image's input hash is computed over those
// stand-ins. An image whose hash cannot be computed is left out, so
// Desired reports it.
func sourceLock(cfg *lang.Config) *lockfiles.Lock {
	if cfg == nil {
		return nil
	}
	l := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	for name, img := range cfg.Images {
		pins := map[string]*lockfiles.Pin{}
		for _, in := range recipe.Inputs(img) {
			if in.Source == nil {
				continue
			}
			pins[in.Key] = &lockfiles.Pin{Source: in.Source.Raw, Kind: string(in.Source.Kind), Version: in.Source.Raw, SHA256: in.Source.SHA256}
		}
		if reqs := img.Packages.Requests; len(reqs) > 0 {
			// The package set stands in by its request list; the
			// closure a lock would pin is not known. Both sides use
			// the same kind, so only the list can differ.
			want := strings.Join(reqs, ", ")
			pins[lockfiles.PackagesKey] = &lockfiles.Pin{Source: want, Kind: lockfiles.KindDebPackages, Version: want}
		}
		hash, err := recipe.InputHash(img, pins)
		if err != nil {
			continue
		}
		l.Images[name] = &lockfiles.Image{Name: name, Platform: img.Platform.String(), InputHash: hash, Inputs: pins}
	}
	return l
}

// stripHashes removes the stand-in input hashes of an unlocked
// comparison from p: the input_hash and image_hash attribute changes, and
// the hashes in each change's before and after.
func stripHashes(p *Plan) {
	for _, c := range p.Changes {
		attrs := c.Attrs[:0]
		for _, a := range c.Attrs {
			if a.Path != "input_hash" && a.Path != "image_hash" {
				attrs = append(attrs, a)
			}
		}
		c.Attrs = attrs
		if len(c.Attrs) == 0 {
			c.Attrs = nil
		}
		c.Before, c.After = withoutHash(c.Before), withoutHash(c.After)
	}
}

func withoutHash(r *state.Resource) *state.Resource {
	if r == nil {
		return nil
	}
	c := *r
	if r.Image != nil {
		img := *r.Image
		img.InputHash = ""
		c.Image = &img
	}
	if r.Sandbox != nil {
		sb := *r.Sandbox
		sb.ImageHash = ""
		c.Sandbox = &sb
	}
	return &c
}
