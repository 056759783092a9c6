package plan

import (
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/state"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// Compute compares the desired resources with the prior ones (the
// resources in state, or the desired resources of another revision of the
// configuration) and returns the plan that turns prior into desired. It
// does not set Against or the state identity; FromState and Against do.
//
// Images are replaced when their input hash, provision hash (their provision
// steps, which run again) or platform changes; there is
// nothing to update in place in an image. An image's local inputs (file:
// and oci-layout: sources) are host files the guest sees, so a created,
// replaced or updated image lists each one that is new or names another
// path as widening, and each one removed as narrowing
// (policy.CompareImageInputs); a destroyed image lists none. A sandbox is replaced when its
// image, image hash, CPUs, memory, user or environment change, or a mount
// is added, removed or pointed at another host directory; any other
// policy change (egress, secrets, a mount's access and path rules) is
// applied in place to the running sandbox and the sandbox is updated.
//
// Policy changes are classified with policy.Compare. A replaced sandbox
// lists its policy changes too. A created sandbox lists its whole policy
// as widening (compared with no policy at all): a new sandbox widens what
// can run, and a reviewer sees everything it may reach. A destroyed
// sandbox lists none.
//
// A policy whose only difference is in hosts mappings of names it does
// not reach (policy.Sandbox.UsedHosts) has not moved: such a mapping
// does nothing, so the sandbox is left as it is.
//
// A sandbox that state records as running but that a refresh found gone
// (SandboxAttrs.Runtime.Gone) is replaced: it is re-created, after what
// is left of it (a QEMU whose supervisor was killed) is cleaned up. So is
// one whose supervisor runs but whose guest agent does not answer
// (Runtime.Unhealthy): it cannot run commands, and its reason says so.
//
// Resources are matched by address; a resource whose Addr is unset is
// matched by its Address string, as read from a state file.
func Compute(desired, prior []*state.Resource) *Plan {
	type pair struct{ before, after *state.Resource }
	pairs := map[addrs.Ref]*pair{}
	var order []addrs.Ref
	get := func(r *state.Resource) *pair {
		a := resourceAddr(r)
		p, ok := pairs[a]
		if !ok {
			p = &pair{}
			pairs[a] = p
			order = append(order, a)
		}
		return p
	}
	for _, r := range prior {
		if r != nil {
			get(r).before = r
		}
	}
	for _, r := range desired {
		if r != nil {
			get(r).after = r
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Less(order[j]) })

	p := &Plan{}
	replacedImages := map[string]bool{}
	for _, a := range order {
		pr := pairs[a]
		var rc *ResourceChange
		switch {
		case a.Kind == addrs.Image || imageOf(pr.before, pr.after):
			rc = diffImage(a, pr.before, pr.after)
			if rc.Action == Replace {
				replacedImages[a.Name] = true
			}
		default:
			rc = diffSandbox(a, pr.before, pr.after, replacedImages)
		}
		p.Changes = append(p.Changes, rc)
	}
	return p
}

// resourceAddr returns r.Addr, or the address parsed from r.Address when
// Addr is unset (state files serialize only the string).
func resourceAddr(r *state.Resource) addrs.Ref {
	if r.Addr.Name != "" {
		return r.Addr
	}
	if a, err := addrs.ParseRef(r.Address); err == nil {
		return a
	}
	return addrs.Ref{Name: r.Address}
}

func imageOf(rs ...*state.Resource) bool {
	for _, r := range rs {
		if r != nil && r.Image != nil {
			return true
		}
	}
	return false
}

// attrsOf returns the attributes of before and after that get picks,
// empty ones where a side is absent, so that a diff compares values only.
func attrsOf[T any](before, after *state.Resource, get func(*state.Resource) *T) (b, n *T) {
	pick := func(r *state.Resource) *T {
		if r != nil {
			if a := get(r); a != nil {
				return a
			}
		}
		return new(T)
	}
	return pick(before), pick(after)
}

func diffImage(a addrs.Ref, before, after *state.Resource) *ResourceChange {
	rc := &ResourceChange{Addr: a, Before: before, After: after}
	b, n := attrsOf(before, after, func(r *state.Resource) *state.ImageAttrs { return r.Image })
	var attrs []AttrChange
	add := func(path, x, y string, forces bool) {
		if x != y {
			attrs = append(attrs, AttrChange{Path: path, Before: x, After: y, ForcesReplacement: forces})
		}
	}
	add("platform", b.Platform, n.Platform, true)
	add("input_hash", b.InputHash, n.InputHash, true)
	add("provision_hash", b.ProvisionHash, n.ProvisionHash, true)
	var changedInputs []string
	for _, k := range inputKeys(b.Inputs, n.Inputs) {
		if b.Inputs[k] != n.Inputs[k] {
			add("inputs."+k, b.Inputs[k], n.Inputs[k], false)
			changedInputs = append(changedInputs, k)
		}
	}
	rc.Attrs = attrs
	switch {
	case before == nil:
		rc.Action = Create
	case after == nil:
		rc.Action = Delete
	case b.Platform != n.Platform:
		rc.Action = Replace
		rc.Reason = "its platform changed"
	case b.InputHash != n.InputHash:
		rc.Action = Replace
		if len(changedInputs) > 0 {
			rc.Reason = inputsReason(changedInputs, b.Inputs, n.Inputs)
		} else {
			rc.Reason = "its recipe changed"
		}
	case b.ProvisionHash != n.ProvisionHash:
		// The steps run again and make another disk.
		rc.Action = Replace
		rc.Reason = "its provision steps changed"
	case len(attrs) > 0:
		// Only the recorded source strings differ; the bytes do not.
		rc.Action = Update
	default:
		rc.Action = NoOp
	}
	if rc.Action != Delete {
		rc.Policy = policy.CompareImageInputs(b.Inputs, n.Inputs, a.String())
	}
	if rc.Action == Create || rc.Action == Delete {
		rc.Attrs = nil
		for _, c := range attrs {
			c.ForcesReplacement = false
			rc.Attrs = append(rc.Attrs, c)
		}
	}
	return rc
}

// inputKeys returns the keys of both maps: base, kernel, then the rest
// sorted.
func inputKeys(ms ...map[string]string) []string {
	keys := sortedKeys(ms...)
	rank := func(k string) int {
		switch k {
		case "base":
			return 0
		case "kernel":
			return 1
		}
		return 2
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	return keys
}

func diffSandbox(a addrs.Ref, before, after *state.Resource, replacedImages map[string]bool) *ResourceChange {
	rc := &ResourceChange{Addr: a, Before: before, After: after}
	b, n := attrsOf(before, after, func(r *state.Resource) *state.SandboxAttrs { return r.Sandbox })
	var reasons []string
	add := func(path, x, y, reason string) {
		if x == y {
			return
		}
		rc.Attrs = append(rc.Attrs, AttrChange{Path: path, Before: x, After: y, ForcesReplacement: true})
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	imageRef := func(name string) string {
		if name == "" {
			return ""
		}
		return addrs.ImageRef(name).String()
	}
	add("image", imageRef(b.Image), imageRef(n.Image), "it uses "+imageRef(n.Image)+" instead of "+imageRef(b.Image))
	imageReason := imageRef(n.Image) + " changed"
	if replacedImages[n.Image] {
		imageReason = imageRef(n.Image) + " is replaced"
	}
	if b.Image != n.Image {
		imageReason = "" // already explained
	}
	add("image_hash", b.ImageHash, n.ImageHash, imageReason)
	add("cpus", intString(b.CPUs), intString(n.CPUs), "cpus changed")
	add("memory", sizeString(b.Memory), sizeString(n.Memory), "memory changed")
	add("user", b.User, n.User, "user changed")
	envChanged := false
	for _, k := range sortedKeys(b.Env, n.Env) {
		bv, bok := b.Env[k]
		nv, nok := n.Env[k]
		if bok != nok || bv != nv {
			rc.Attrs = append(rc.Attrs, AttrChange{Path: "env." + k, Before: bv, After: nv, ForcesReplacement: true})
			envChanged = true
		}
	}
	if envChanged {
		reasons = append(reasons, "env changed")
	}
	bm, nm := mountHosts(b.Policy.Mounts), mountHosts(n.Policy.Mounts)
	for _, g := range sortedKeys(bm, nm) {
		bh, bok := bm[g]
		nh, nok := nm[g]
		var reason string
		switch {
		case !bok:
			reason = "mount " + g + " is added"
		case !nok:
			reason = "mount " + g + " is removed"
		case bh != nh:
			reason = "mount " + g + " has a new host directory"
		default:
			// The same host directory with other rules: a running
			// sandbox's file server keeps the rules it started with,
			// so the new ones take a new sandbox.
			bmt, nmt := mountAt(b.Policy.Mounts, g), mountAt(n.Policy.Mounts, g)
			if bmt.SameServed(nmt) {
				continue
			}
			rc.Attrs = append(rc.Attrs, AttrChange{Path: "mounts[" + strconv.Quote(g) + "].rules", Before: servedRules(bmt), After: servedRules(nmt), ForcesReplacement: true})
			reasons = append(reasons, "mount "+g+" has new rules")
			continue
		}
		rc.Attrs = append(rc.Attrs, AttrChange{Path: "mounts[" + strconv.Quote(g) + "]", Before: bh, After: nh, ForcesReplacement: true})
		reasons = append(reasons, reason)
	}

	switch {
	case before == nil:
		rc.Action = Create
		rc.Policy = policy.Compare(policy.Sandbox{}, n.Policy)
	case after == nil:
		rc.Action = Delete
	default:
		rc.Policy = policy.Compare(b.Policy, n.Policy)
		policyMoved := len(rc.Policy) > 0 ||
			(b.PolicyHash != "" && n.PolicyHash != "" && b.PolicyHash != n.PolicyHash && !onlyUnusedHostsDiffer(b, n))
		switch {
		case len(rc.Attrs) > 0:
			rc.Action = Replace
			rc.Reason = joinClauses(reasons)
			if gone := goneReason(b); gone != "" {
				rc.Reason += ", and " + gone
			}
		case goneReason(b) != "":
			rc.Action = Replace
			rc.Reason = goneReason(b)
		case policyMoved:
			rc.Action = Update
		default:
			rc.Action = NoOp
		}
	}
	if rc.Action == Create || rc.Action == Delete {
		for i := range rc.Attrs {
			rc.Attrs[i].ForcesReplacement = false
		}
	}
	return rc
}

// goneReason explains a sandbox found not running when state was
// refreshed (SandboxAttrs.Runtime.Gone), or is empty.
func goneReason(a *state.SandboxAttrs) string {
	if a.Runtime == nil || a.Runtime.Gone == "" {
		return ""
	}
	if a.Runtime.Unhealthy != "" {
		return "it cannot run commands (" + a.Runtime.Unhealthy + ")"
	}
	return "it no longer runs (" + a.Runtime.Gone + ")"
}

func intString(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func sizeString(n int64) string {
	if n == 0 {
		return ""
	}
	return lang.FormatSize(n)
}

// mountAt is the mount of ms at guest path g.
func mountAt(ms []policy.Mount, g string) policy.Mount {
	for _, m := range ms {
		if m.Guest == g {
			return m
		}
	}
	return policy.Mount{}
}

// servedRules renders how a mount is served, for a plan's attribute
// change: its access, then each rule list and setting it has.
func servedRules(m policy.Mount) string {
	parts := []string{string(m.Access)}
	list := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, name+"="+strconv.Quote(strings.Join(v, ",")))
		}
	}
	list("hide", m.Hide)
	list("readonly", m.ReadOnly)
	list("tmpfs", m.Tmpfs)
	if m.GitWritable {
		parts = append(parts, "git_metadata=writable")
	}
	if m.Owner != "" {
		parts = append(parts, "owner="+strconv.Quote(m.Owner))
	}
	return strings.Join(parts, " ")
}

func mountHosts(ms []policy.Mount) map[string]string {
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		out[m.Guest] = m.Host
	}
	return out
}

// sortedKeys returns the keys of all the maps, each once, sorted.
func sortedKeys(ms ...map[string]string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// joinClauses joins "a", "b", "c" as "a, b and c".
func joinClauses(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// Summary counts the changes in a plan.
type Summary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Replace int `json:"replace"`
	Destroy int `json:"destroy"`
	// Widen and Narrow count classified policy changes across all
	// resources, including the policy of created sandboxes.
	Widen  int `json:"widen"`
	Narrow int `json:"narrow"`
}

// Summary counts the plan's actions and policy changes.
func (p *Plan) Summary() Summary {
	var s Summary
	if p == nil {
		return s
	}
	for _, c := range p.Changes {
		switch c.Action {
		case Create:
			s.Add++
		case Update:
			s.Change++
		case Replace:
			s.Replace++
		case Delete:
			s.Destroy++
		}
		for _, pc := range c.Policy {
			switch pc.Direction {
			case policy.Widen:
				s.Widen++
			case policy.Narrow:
				s.Narrow++
			}
		}
	}
	return s
}

// HasChanges reports whether applying the plan would change anything.
func (p *Plan) HasChanges() bool {
	if p == nil {
		return false
	}
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// Widens reports whether any policy change in the plan widens what a
// sandbox may do (including the policy of a created sandbox).
func (p *Plan) Widens() bool { return p.Summary().Widen > 0 }

// onlyUnusedHostsDiffer reports whether the recorded and the desired
// policies differ only in mappings neither uses: b's policy is the one
// its hash was computed from, and the two hash the same once each keeps
// only the hosts mappings it uses.
func onlyUnusedHostsDiffer(b, n *state.SandboxAttrs) bool {
	if policy.Hash(b.Policy) != b.PolicyHash {
		return false
	}
	used := func(p policy.Sandbox) policy.Sandbox {
		p.Hosts = p.UsedHosts()
		return p
	}
	return policy.Hash(used(b.Policy)) == policy.Hash(used(n.Policy))
}
