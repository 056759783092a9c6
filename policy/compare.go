package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

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

// Op says what happened to the rule a change is about.
type Op string

// Rule operations.
const (
	RuleAdded    Op = "add"
	RuleRemoved  Op = "remove"
	RuleModified Op = "modify"
)

// Change is one classified difference between two policies.
type Change struct {
	Direction Direction `json:"direction"`
	// Op says whether the rule was added, removed or modified. It is not
	// the direction: removing a hide rule widens.
	Op Op `json:"op"`
	// Kind is the rule kind: "allow", "allow.passthrough",
	// "allow.methods", "allow.paths", "allow.git_push", "tcp", "hosts",
	// "ca", "secret",
	// "secret.source", "secret.hosts", "secret.headers", "secret.oauth", "secret.file",
	// "secret.plain_http", "secret.env", "secret.aws",
	// "secret.aws.services", "secret.aws.regions", "secret.aws.env",
	// "secret.body", "secret.websocket", "mount",
	// "mount.host", "mount.access", "mount.hide", "mount.readonly",
	// "mount.tmpfs", "mount.git_metadata", "mount.owner", "forbid_env". Compare lists changes
	// in this order.
	// "image.input" is a host file an image's input brings into the guest
	// (CompareImageInputs).
	Kind string `json:"kind"`
	// Subject is what changed, e.g. "api.example.com" or "/workspace".
	Subject string `json:"subject"`
	// Detail is a short human sentence, e.g. `hide rule ".env" removed
	// from /workspace`.
	Detail string `json:"detail"`
	// Origin is where the new (or, for removals, old) rule is declared.
	Origin Origin `json:"origin"`
}

// kinds is the order Compare lists changes in.
var kinds = []string{
	"allow", "allow.passthrough", "allow.methods", "allow.paths", "allow.git_push",
	"tcp", "hosts", "ca",
	"secret", "secret.source", "secret.hosts", "secret.headers", "secret.plain_http", "secret.env",
	"secret.aws", "secret.aws.services", "secret.aws.regions", "secret.aws.env",
	"secret.body", "secret.websocket",
	"mount", "mount.host", "mount.access", "mount.hide", "mount.readonly", "mount.tmpfs", "mount.git_metadata", "mount.owner",
	"forbid_env",
	"image.input",
}

func kindRank(k string) int {
	for i, s := range kinds {
		if s == k {
			return i
		}
	}
	return len(kinds)
}

// Compare classifies every difference between the policy old and the
// policy new as widening, narrowing or neutral. Origins are not compared.
// The result is sorted by kind (in the order listed on Change.Kind), then
// subject, then detail; it is empty when the policies allow the same.
//
// Host patterns are compared by coverage, not by spelling: a new pattern
// that an old one already covers widens nothing, and replacing
// "*.example.com" with "api.example.com" is a single narrowing change.
// Secrets are matched by name, mounts by guest path and CAs by path.
//
// Passthrough and request rules are compared by how each pattern's hosts
// are treated before and after, by every rule that applies to them
// (compareRuleModes), so that adding a passthrough "pinned.example.com"
// beside an inspected "*.example.com" shows no passthrough change (the
// engine still inspects it) and removing the paths of "api.example.com"
// beside a GET-only "*.example.com" widens. Hosts mappings and secrets are
// compared by where connections and secrets go (compareHosts,
// compareSecretRoutes): a secret's host that loses its mapping widens.
//
// When the egress engine, under new, lets a request or connection through
// that it refused under old, dials it at another address, inspects it
// less or sends a secret with it that it did not, at least one change
// widens; when no change widens or narrows, the engine decides every
// request as before. internal/egress's TestClassificationFollowsEngine
// and FuzzClassification check both against the engine's own decisions.
func Compare(old, new Sandbox) []Change {
	var cs []Change
	cs = append(cs, compareAllow(old.Allow, new.Allow)...)
	cs = append(cs, compareRuleModes(old.Allow, new.Allow)...)
	cs = append(cs, compareTCP(old.TCP, new.TCP)...)
	cs = append(cs, compareHosts(old, new)...)
	cs = append(cs, compareCAs(old.CAs, new.CAs)...)
	cs = append(cs, compareSecrets(old.Secrets, new.Secrets)...)
	cs = append(cs, compareSecretRoutes(old, new)...)
	cs = append(cs, compareMounts(old.Mounts, new.Mounts)...)
	cs = append(cs, compareForbidEnv(old, new)...)
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if ra, rb := kindRank(a.Kind), kindRank(b.Kind); ra != rb {
			return ra < rb
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Detail < b.Detail
	})
	return cs
}

// patternChange is one classified difference between two pattern sets.
type patternChange struct {
	dir     Direction
	op      Op
	pattern HostPattern
	// related are the patterns on the other side that explain the change:
	// for a widening, the removed patterns it broadens; for a narrowing,
	// the added patterns it narrows to; for a neutral change, the kept
	// patterns that still cover it.
	related []HostPattern
}

// comparePatterns classifies the differences between two sets of host
// patterns by coverage:
//
//   - an added pattern no old pattern covers widens; one a kept pattern
//     covers is neutral; one only removed patterns cover is part of their
//     narrowing and not listed;
//   - a removed pattern no new pattern covers narrows; one a kept pattern
//     covers is neutral; one only added patterns cover is part of their
//     widening and not listed.
func comparePatterns(old, new []HostPattern) []patternChange {
	inOld := map[HostPattern]bool{}
	for _, p := range old {
		inOld[p] = true
	}
	inNew := map[HostPattern]bool{}
	for _, p := range new {
		inNew[p] = true
	}
	var kept, added, removed []HostPattern
	for _, p := range uniq(new) {
		if inOld[p] {
			kept = append(kept, p)
		} else {
			added = append(added, p)
		}
	}
	for _, p := range uniq(old) {
		if !inNew[p] {
			removed = append(removed, p)
		}
	}
	var out []patternChange
	for _, a := range added {
		if covering := coveredBy(a, kept); len(covering) > 0 {
			out = append(out, patternChange{dir: Neutral, op: RuleAdded, pattern: a, related: covering})
			continue
		}
		if len(coveredBy(a, removed)) > 0 {
			continue // explained by the narrowing of the removed pattern
		}
		out = append(out, patternChange{dir: Widen, op: RuleAdded, pattern: a, related: covers(a, removed)})
	}
	for _, r := range removed {
		if covering := coveredBy(r, kept); len(covering) > 0 {
			out = append(out, patternChange{dir: Neutral, op: RuleRemoved, pattern: r, related: covering})
			continue
		}
		if len(coveredBy(r, added)) > 0 {
			continue // explained by the widening of the added pattern
		}
		out = append(out, patternChange{dir: Narrow, op: RuleRemoved, pattern: r, related: covers(r, added)})
	}
	return out
}

func uniq(ps []HostPattern) []HostPattern {
	seen := map[HostPattern]bool{}
	var out []HostPattern
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// coveredBy returns the patterns in set that cover p.
func coveredBy(p HostPattern, set []HostPattern) []HostPattern {
	var out []HostPattern
	for _, q := range set {
		if q.Covers(p) {
			out = append(out, q)
		}
	}
	return out
}

// covers returns the patterns in set that p covers.
func covers(p HostPattern, set []HostPattern) []HostPattern {
	var out []HostPattern
	for _, q := range set {
		if p.Covers(q) {
			out = append(out, q)
		}
	}
	return out
}

func joinPatterns(ps []HostPattern) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// describeHosts names what a pattern matches: "host api.x.com" or "hosts
// matching *.x.com".
func describeHosts(p HostPattern) string {
	if p.Wildcard {
		return "hosts matching " + p.String()
	}
	return "host " + p.String()
}

func compareAllow(old, new []AllowRule) []Change {
	origins := map[HostPattern]Origin{}
	var op, np []HostPattern
	for _, r := range old {
		op = append(op, r.Pattern)
		origins[r.Pattern] = r.Origin
	}
	for _, r := range new {
		np = append(np, r.Pattern)
		origins[r.Pattern] = r.Origin // a pattern on both sides takes the new origin
	}
	var cs []Change
	for _, pc := range comparePatterns(op, np) {
		c := Change{Direction: pc.dir, Op: pc.op, Kind: "allow", Subject: pc.pattern.String(), Origin: origins[pc.pattern]}
		switch {
		case pc.dir == Widen && len(pc.related) > 0:
			c.Detail = fmt.Sprintf("broadens %s to %s", joinPatterns(pc.related), pc.pattern) + describeMode(effective(new, pc.pattern))
		case pc.dir == Widen:
			c.Detail = "adds " + describeHosts(pc.pattern) + describeMode(effective(new, pc.pattern))
		case pc.dir == Narrow && len(pc.related) > 0:
			c.Detail = fmt.Sprintf("narrows %s to %s", pc.pattern, joinPatterns(pc.related))
		case pc.dir == Narrow:
			c.Detail = "removes " + describeHosts(pc.pattern)
		case pc.op == RuleAdded:
			c.Detail = fmt.Sprintf("adds %s, already allowed by %s", pc.pattern, joinPatterns(pc.related))
		default:
			c.Detail = fmt.Sprintf("removes %s, still allowed by %s", pc.pattern, joinPatterns(pc.related))
		}
		cs = append(cs, c)
	}
	return cs
}

func compareTCP(old, new []TCPRule) []Change {
	oldSet := map[HostPort]TCPRule{}
	for _, r := range old {
		oldSet[r.Dest] = r
	}
	newSet := map[HostPort]TCPRule{}
	for _, r := range new {
		newSet[r.Dest] = r
	}
	var cs []Change
	for d, r := range newSet {
		if _, ok := oldSet[d]; !ok {
			cs = append(cs, Change{Direction: Widen, Op: RuleAdded, Kind: "tcp", Subject: d.String(),
				Detail: "adds raw TCP to " + d.String(), Origin: r.Origin})
		}
	}
	for d, r := range oldSet {
		if _, ok := newSet[d]; !ok {
			cs = append(cs, Change{Direction: Narrow, Op: RuleRemoved, Kind: "tcp", Subject: d.String(),
				Detail: "removes raw TCP to " + d.String(), Origin: r.Origin})
		}
	}
	return cs
}

// compareHosts classifies changes to the hosts mappings a policy uses
// (UsedHosts: those of names it reaches; a mapping of a name no rule
// allows does nothing). A mapping that comes into use, or one to another
// address, widens: connections to the name go to an address the spec
// chose, which may be loopback or private. Removing the mapping of a
// name the new policy still lets the guest reach (an allow or tcp rule)
// widens too: its connections, and any secret sent with them, then go
// wherever public DNS points. A mapping that goes out of use because
// nothing reaches its name any more narrows.
func compareHosts(old, new Sandbox) []Change {
	oldMap := map[string]HostMapping{}
	for _, m := range old.UsedHosts() {
		oldMap[m.Name] = m
	}
	newMap := map[string]HostMapping{}
	for _, m := range new.UsedHosts() {
		newMap[m.Name] = m
	}
	var cs []Change
	for name, m := range newMap {
		o, ok := oldMap[name]
		switch {
		case !ok:
			cs = append(cs, Change{Direction: Widen, Op: RuleAdded, Kind: "hosts", Subject: name,
				Detail: fmt.Sprintf("maps %s to %s", name, m.Addr), Origin: m.Origin})
		case o.Addr != m.Addr:
			cs = append(cs, Change{Direction: Widen, Op: RuleModified, Kind: "hosts", Subject: name,
				Detail: fmt.Sprintf("maps %s to %s instead of %s", name, m.Addr, o.Addr), Origin: m.Origin})
		}
	}
	for name, o := range oldMap {
		if _, ok := newMap[name]; ok {
			continue
		}
		if new.Reaches(name) {
			cs = append(cs, Change{Direction: Widen, Op: RuleRemoved, Kind: "hosts", Subject: name,
				Detail: fmt.Sprintf("removes the mapping of %s to %s: connections to %s go wherever public DNS points", name, o.Addr, name), Origin: o.Origin})
			continue
		}
		detail := fmt.Sprintf("removes the mapping of %s to %s", name, o.Addr)
		if new.dialTarget(name) != "" {
			detail = fmt.Sprintf("the mapping of %s to %s is no longer used: nothing reaches %s", name, o.Addr, name)
		}
		cs = append(cs, Change{Direction: Narrow, Op: RuleRemoved, Kind: "hosts", Subject: name, Detail: detail, Origin: o.Origin})
	}
	return cs
}

// SourceLabel renders a secret source for people: "env:NAME" and
// "file:PATH" as written, a command as its program name only, so that
// arguments (which might carry a literal) are never shown, and no source
// (the spec leaves it to the user's bindings file) as "the user's
// bindings".
func SourceLabel(source string) string {
	if source == "" {
		return "the user's bindings"
	}
	cmd, ok := strings.CutPrefix(source, "command:")
	if !ok {
		return source
	}
	fields := strings.Fields(cmd)
	switch {
	case len(fields) == 0:
		return "command:"
	case len(fields) == 1:
		return "command:" + fields[0]
	}
	return "command:" + fields[0] + " …"
}

func compareSecrets(old, new []SecretBinding) []Change {
	oldMap := map[string]SecretBinding{}
	for _, s := range old {
		oldMap[s.Name] = s
	}
	newMap := map[string]SecretBinding{}
	for _, s := range new {
		newMap[s.Name] = s
	}
	var cs []Change
	for name, s := range newMap {
		o, ok := oldMap[name]
		if !ok {
			cs = append(cs, Change{Direction: Widen, Op: RuleAdded, Kind: "secret", Subject: name,
				Detail: fmt.Sprintf("brokers secret %s in $%s from %s for %s", name, s.Env, SourceLabel(s.Source), joinPatterns(s.Hosts)),
				Origin: s.Origin})
			cs = append(cs, compareSecretPlaces(SecretBinding{Name: name}, s)...)
			continue
		}
		cs = append(cs, compareSecretPlaces(o, s)...)
		if o.Source != s.Source {
			cs = append(cs, Change{Direction: Widen, Op: RuleModified, Kind: "secret.source", Subject: name,
				Detail: fmt.Sprintf("a different credential is brokered for secret %s: %s instead of %s", name, SourceLabel(s.Source), SourceLabel(o.Source)),
				Origin: s.Origin})
		}
		if o.Env != s.Env {
			cs = append(cs, Change{Direction: Neutral, Op: RuleModified, Kind: "secret.env", Subject: name,
				Detail: fmt.Sprintf("secret %s moves from $%s to $%s", name, o.Env, s.Env), Origin: s.Origin})
		}
		for _, pc := range comparePatterns(o.Hosts, s.Hosts) {
			c := Change{Direction: pc.dir, Op: pc.op, Kind: "secret.hosts", Subject: name, Origin: s.Origin}
			switch {
			case pc.dir == Widen && len(pc.related) > 0:
				c.Detail = fmt.Sprintf("secret %s is sent to %s instead of %s", name, pc.pattern, joinPatterns(pc.related))
			case pc.dir == Widen:
				c.Detail = fmt.Sprintf("secret %s is also sent to %s", name, describeHosts(pc.pattern))
			case pc.dir == Narrow && len(pc.related) > 0:
				c.Detail = fmt.Sprintf("secret %s is sent to %s instead of %s", name, joinPatterns(pc.related), pc.pattern)
			case pc.dir == Narrow:
				c.Detail = fmt.Sprintf("secret %s is no longer sent to %s", name, describeHosts(pc.pattern))
			case pc.op == RuleAdded:
				c.Detail = fmt.Sprintf("secret %s adds host %s, already covered by %s", name, pc.pattern, joinPatterns(pc.related))
			default:
				c.Detail = fmt.Sprintf("secret %s drops host %s, still covered by %s", name, pc.pattern, joinPatterns(pc.related))
			}
			cs = append(cs, c)
		}
	}
	for name, o := range oldMap {
		if _, ok := newMap[name]; !ok {
			cs = append(cs, Change{Direction: Narrow, Op: RuleRemoved, Kind: "secret", Subject: name,
				Detail: fmt.Sprintf("stops brokering secret %s ($%s)", name, o.Env), Origin: o.Origin})
		}
	}
	return cs
}

// compareSecretPlaces compares where in a request a secret goes (its
// headers) and which destinations take it over plain HTTP. Either added
// widens: the value reaches a header or a cleartext connection it did not.
func compareSecretPlaces(o, s SecretBinding) []Change {
	var cs []Change
	for _, d := range diffStrings(o.Headers, s.Headers) {
		c := Change{Op: RuleAdded, Direction: Widen, Kind: "secret.headers", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s is also substituted as the whole value of header %s", s.Name, d.value)}
		if !d.added {
			c.Op, c.Direction = RuleRemoved, Narrow
			c.Detail = fmt.Sprintf("secret %s is no longer substituted in header %s", s.Name, d.value)
		}
		cs = append(cs, c)
	}
	str := func(hps []HostPort) []string {
		var out []string
		for _, hp := range hps {
			out = append(out, hp.String())
		}
		return out
	}
	for _, d := range diffStrings(str(o.PlainHTTP), str(s.PlainHTTP)) {
		c := Change{Op: RuleAdded, Direction: Widen, Kind: "secret.plain_http", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s may be sent unencrypted, over plain HTTP, to %s", s.Name, d.value)}
		if !d.added {
			c.Op, c.Direction = RuleRemoved, Narrow
			c.Detail = fmt.Sprintf("secret %s is no longer sent over plain HTTP to %s", s.Name, d.value)
		}
		cs = append(cs, c)
	}
	cs = append(cs, compareAWS(o, s)...)
	cs = append(cs, compareSecretBodies(o, s)...)
	return append(cs, compareSecretOAuth(o, s)...)
}

// compareSecretBodies compares the request bodies and WebSocket messages
// a secret is substituted into. A body field added, or WebSocket
// substitution turned on or moved to another place in the message,
// widens: the value reaches a place it did not. One removed narrows.
func compareSecretBodies(o, s SecretBinding) []Change {
	var cs []Change
	keys := func(bs []BodyField) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Key())
		}
		return out
	}
	for _, d := range diffStrings(keys(o.Body), keys(s.Body)) {
		c := Change{Op: RuleAdded, Direction: Widen, Kind: "secret.body", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s is also substituted in the body of requests to %s", s.Name, d.value)}
		for _, b := range s.Body {
			if b.Key() == d.value {
				c.Origin = b.Origin
			}
		}
		if !d.added {
			c.Op, c.Direction = RuleRemoved, Narrow
			c.Detail = fmt.Sprintf("secret %s is no longer substituted in the body of requests to %s", s.Name, d.value)
		}
		cs = append(cs, c)
	}
	switch ow, nw := o.WebSocket, s.WebSocket; {
	case ow == nil && nw != nil:
		cs = append(cs, Change{Op: RuleAdded, Direction: Widen, Kind: "secret.websocket", Subject: s.Name, Origin: nw.Origin,
			Detail: fmt.Sprintf("secret %s is also substituted in WebSocket messages to its hosts: %s", s.Name, nw.Place())})
	case ow != nil && nw == nil:
		cs = append(cs, Change{Op: RuleRemoved, Direction: Narrow, Kind: "secret.websocket", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s is no longer substituted in WebSocket messages", s.Name)})
	case ow != nil && ow.JSON != nw.JSON:
		cs = append(cs, Change{Op: RuleModified, Direction: Widen, Kind: "secret.websocket", Subject: s.Name, Origin: nw.Origin,
			Detail: fmt.Sprintf("secret %s is substituted in WebSocket messages as %s instead of %s", s.Name, nw.Place(), ow.Place())})
	}
	return cs
}

// compareAWS compares what an AWS credential is re-signed for. Becoming
// an AWS credential, or a service or region added, widens: the real
// credential signs requests it did not. Ceasing to be one, or one
// dropped, narrows; the variables the placeholders go in are neutral.
func compareAWS(o, s SecretBinding) []Change {
	var cs []Change
	switch {
	case o.AWS == nil && s.AWS == nil:
		return nil
	case s.AWS == nil:
		cs := []Change{{Op: RuleRemoved, Direction: Narrow, Kind: "secret.aws", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s is no longer an AWS credential re-signed on the host", s.Name)}}
		if s.OAuth == nil {
			// Its value is now substituted as it is, where a placeholder
			// stands in a request's headers (or bodies), to its hosts.
			cs = append(cs, Change{Op: RuleModified, Direction: Widen, Kind: "secret.aws", Subject: s.Name, Origin: s.Origin,
				Detail: fmt.Sprintf("secret %s's whole value is substituted into requests to its hosts, where it only signed them", s.Name)})
		}
		return cs
	}
	oa := o.AWS
	if oa == nil {
		oa = &AWSCredential{}
		cs = append(cs, Change{Op: RuleAdded, Direction: Widen, Kind: "secret.aws", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s is an AWS credential: requests to its hosts signed with its placeholders are re-signed with the real one", s.Name)})
	} else if oa.SecretKeyEnv != s.AWS.SecretKeyEnv || oa.SessionTokenEnv != s.AWS.SessionTokenEnv {
		cs = append(cs, Change{Op: RuleModified, Direction: Neutral, Kind: "secret.aws.env", Subject: s.Name, Origin: s.Origin,
			Detail: fmt.Sprintf("secret %s puts its placeholders in $%s and $%s", s.Name, s.AWS.SecretKeyEnv, s.AWS.SessionTokenEnv)})
	}
	for _, f := range []struct {
		kind, what string
		old, new   []string
	}{
		{"secret.aws.services", "service", oa.Services, s.AWS.Services},
		{"secret.aws.regions", "region", oa.Regions, s.AWS.Regions},
	} {
		for _, d := range diffStrings(f.old, f.new) {
			c := Change{Op: RuleAdded, Direction: Widen, Kind: f.kind, Subject: s.Name, Origin: s.Origin,
				Detail: fmt.Sprintf("AWS secret %s also signs requests for %s %s", s.Name, f.what, d.value)}
			if !d.added {
				c.Op, c.Direction = RuleRemoved, Narrow
				c.Detail = fmt.Sprintf("AWS secret %s no longer signs requests for %s %s", s.Name, f.what, d.value)
			}
			cs = append(cs, c)
		}
	}
	return cs
}

// compareSecretOAuth compares how a secret is brokered as an OAuth login
// and whether its credential file reaches the guest. A new token endpoint
// widens (the refresh token goes somewhere it did not), as does a new
// file in the guest (it learns the id token's claims); either removed
// narrows, and a file that only moves or changes owner is neutral.
func compareSecretOAuth(o, s SecretBinding) []Change {
	var cs []Change
	ch := func(dir Direction, op Op, kind, detail string) {
		cs = append(cs, Change{Direction: dir, Op: op, Kind: kind, Subject: s.Name, Detail: detail, Origin: s.Origin})
	}
	switch {
	case o.OAuth == nil && s.OAuth != nil:
		ch(Widen, RuleAdded, "secret.oauth", fmt.Sprintf("secret %s is an OAuth login whose refresh token the host sends to %s", s.Name, s.OAuth.TokenURL))
	case o.OAuth != nil && s.OAuth == nil:
		ch(Narrow, RuleRemoved, "secret.oauth", fmt.Sprintf("secret %s is no longer refreshed through %s", s.Name, o.OAuth.TokenURL))
		if s.AWS == nil {
			// The whole credential file, refresh token and all, is now
			// the value substituted into requests to its hosts.
			ch(Widen, RuleModified, "secret.oauth", fmt.Sprintf("secret %s's whole source is substituted into requests to its hosts, where only its login's access token went", s.Name))
		}
	case o.OAuth != nil && o.OAuth.TokenURL != s.OAuth.TokenURL:
		ch(Widen, RuleModified, "secret.oauth", fmt.Sprintf("secret %s's refresh token is sent to %s instead of %s", s.Name, s.OAuth.TokenURL, o.OAuth.TokenURL))
	case o.OAuth != nil && *o.OAuth != *s.OAuth:
		ch(Neutral, RuleModified, "secret.oauth", fmt.Sprintf("secret %s reads its tokens or their expiry from other fields of its credential file", s.Name))
	}
	switch {
	case o.File == nil && s.File != nil:
		ch(Widen, RuleAdded, "secret.file", fmt.Sprintf("the guest gets secret %s's credential file at %s, with placeholders for its tokens and the claims of its JWTs", s.Name, s.File.Path))
	case o.File != nil && s.File == nil:
		ch(Narrow, RuleRemoved, "secret.file", fmt.Sprintf("the guest no longer gets secret %s's credential file at %s", s.Name, o.File.Path))
	case o.File != nil && *o.File != *s.File:
		ch(Neutral, RuleModified, "secret.file", fmt.Sprintf("secret %s's credential file is at %s (owner %s, mode %04o) instead of %s (owner %s, mode %04o)",
			s.Name, s.File.Path, s.File.Owner, s.File.Mode, o.File.Path, o.File.Owner, o.File.Mode))
	}
	return cs
}

type stringDiff struct {
	value string
	added bool
}

// diffStrings lists, sorted, the values only new has (added) and those
// only old has, each once.
func diffStrings(old, new []string) []stringDiff {
	inOld, inNew := map[string]bool{}, map[string]bool{}
	for _, v := range old {
		inOld[v] = true
	}
	for _, v := range new {
		inNew[v] = true
	}
	var out []stringDiff
	for v := range inNew {
		if !inOld[v] {
			out = append(out, stringDiff{v, true})
		}
	}
	for v := range inOld {
		if !inNew[v] {
			out = append(out, stringDiff{v, false})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}

func compareMounts(old, new []Mount) []Change {
	oldMap := map[string]Mount{}
	for _, m := range old {
		oldMap[m.Guest] = m
	}
	newMap := map[string]Mount{}
	for _, m := range new {
		newMap[m.Guest] = m
	}
	var cs []Change
	for guest, m := range newMap {
		o, ok := oldMap[guest]
		if !ok {
			cs = append(cs, Change{Direction: Widen, Op: RuleAdded, Kind: "mount", Subject: guest,
				Detail: fmt.Sprintf("mounts %s at %s (%s)", m.Host, guest, mountSummary(m)), Origin: m.Origin})
			continue
		}
		cs = append(cs, compareMount(o, m)...)
	}
	for guest, o := range oldMap {
		if _, ok := newMap[guest]; !ok {
			cs = append(cs, Change{Direction: Narrow, Op: RuleRemoved, Kind: "mount", Subject: guest,
				Detail: fmt.Sprintf("removes mount %s (%s)", guest, o.Host), Origin: o.Origin})
		}
	}
	return cs
}

// mountSummary lists a mount's access and path rules: `rw; hide ".env",
// "**/*.pem"; read-only ".git/hooks"`.
func mountSummary(m Mount) string {
	parts := []string{string(accessOrDefault(m.Access))}
	for _, r := range []struct {
		name  string
		rules []string
	}{{"hide", m.Hide}, {"read-only", m.ReadOnly}, {"tmpfs", m.Tmpfs}} {
		if len(r.rules) == 0 {
			continue
		}
		q := make([]string, len(r.rules))
		for i, s := range r.rules {
			q[i] = strconv.Quote(s)
		}
		parts = append(parts, r.name+" "+strings.Join(q, ", "))
	}
	if m.GitWritable {
		parts = append(parts, "git metadata writable")
	}
	return strings.Join(parts, "; ")
}

func accessOrDefault(a Access) Access {
	if a == "" {
		return ReadOnly
	}
	return a
}

// compareMount compares two mounts at the same guest path.
func compareMount(o, m Mount) []Change {
	guest := m.Guest
	change := func(dir Direction, op Op, kind, detail string) Change {
		return Change{Direction: dir, Op: op, Kind: kind, Subject: guest, Detail: detail, Origin: m.Origin}
	}
	var cs []Change
	if o.Host != m.Host {
		cs = append(cs, change(Widen, RuleModified, "mount.host",
			fmt.Sprintf("%s now mounts %s instead of %s", guest, m.Host, o.Host)))
	}
	oa, na := accessOrDefault(o.Access), accessOrDefault(m.Access)
	switch {
	case oa == ReadOnly && na == ReadWrite:
		cs = append(cs, change(Widen, RuleModified, "mount.access", fmt.Sprintf("%s becomes writable (ro -> rw)", guest)))
	case oa == ReadWrite && na == ReadOnly:
		cs = append(cs, change(Narrow, RuleModified, "mount.access", fmt.Sprintf("%s becomes read-only (rw -> ro)", guest)))
	case oa != na:
		cs = append(cs, change(Neutral, RuleModified, "mount.access", fmt.Sprintf("%s access changes from %s to %s", guest, oa, na)))
	}
	rules := []struct {
		kind, name, removedNote string
	}{
		{"mount.hide", "hide", ""},
		{"mount.readonly", "read-only", ""},
		{"mount.tmpfs", "tmpfs", " (writes now reach the host)"},
	}
	lists := [][2][]string{{o.Hide, m.Hide}, {o.ReadOnly, m.ReadOnly}, {o.Tmpfs, m.Tmpfs}}
	for i, r := range rules {
		before, after := toSet(lists[i][0]), toSet(lists[i][1])
		for p := range after {
			if !before[p] {
				cs = append(cs, change(Narrow, RuleAdded, r.kind, fmt.Sprintf("%s rule %q added to %s", r.name, p, guest)))
			}
		}
		for p := range before {
			if !after[p] {
				cs = append(cs, change(Widen, RuleRemoved, r.kind, fmt.Sprintf("%s rule %q removed from %s%s", r.name, p, guest, r.removedNote)))
			}
		}
	}
	switch {
	case !o.GitWritable && m.GitWritable:
		cs = append(cs, change(Widen, RuleModified, "mount.git_metadata",
			fmt.Sprintf("the guest may now write the git configuration, hooks and redirections in %s, which git on the host reads and runs", guest)))
	case o.GitWritable && !m.GitWritable:
		cs = append(cs, change(Narrow, RuleModified, "mount.git_metadata",
			fmt.Sprintf("the git configuration, hooks and redirections in %s become read-only to the guest", guest)))
	}
	if o.Owner != m.Owner {
		cs = append(cs, change(Neutral, RuleModified, "mount.owner",
			fmt.Sprintf("owner of %s changes from %s to %s", guest, ownerOrDefault(o.Owner), ownerOrDefault(m.Owner))))
	}
	return cs
}

func ownerOrDefault(s string) string {
	if s == "" {
		return "(default)"
	}
	return s
}

func toSet(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}
