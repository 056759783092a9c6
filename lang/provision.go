package lang

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/policy"
)

// DefaultProvisionTimeout bounds a provision step that sets no timeout.
const DefaultProvisionTimeout = 10 * time.Minute

// MaxProvisionTimeout is the longest timeout a provision step may set.
const MaxProvisionTimeout = 6 * time.Hour

// Provision is one provision step of an image: a command run as root in
// a machine booted from the image's built disk, whose resulting disk is
// the image's disk. Steps run in declaration order, each in the same
// machine after the one before it.
type Provision struct {
	Name string
	// Run is the command's argument vector: the run attribute as
	// written, or, for a script, ["/bin/sh", "-ec", script].
	Run []string
	// Script is the script attribute as written; empty for run.
	Script string
	// Env are environment variables set for the command, besides the
	// image's.
	Env map[string]string
	// Timeout bounds the command; a step that runs longer fails.
	Timeout time.Duration
	// Egress is what the step's machine may reach: its egress block's
	// rules only (allow, passthrough, request, tcp, hosts, ca). The zero
	// value reaches nothing. It has no secrets and no mounts.
	Egress    policy.Sandbox
	DeclRange hcl.Range
}

var provisionSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "run"},
		{Name: "script"},
		{Name: "env"},
		{Name: "timeout"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "egress"}},
}

// decodeProvision reads a provision block of image img.
func (l *loader) decodeProvision(img *Image, b *hcl.Block) *Provision {
	content, diags := b.Body.Content(provisionSchema)
	l.diags = append(l.diags, diags...)
	p := &Provision{Name: b.Labels[0], Timeout: DefaultProvisionTimeout, DeclRange: b.DefRange}
	if !validStepName(p.Name) {
		l.errorf(b.LabelRanges[0], "Invalid provision step name",
			"%q is not a step name: use letters, digits, \"-\" and \"_\", starting with a letter.", p.Name)
	}
	run, script := content.Attributes["run"], content.Attributes["script"]
	switch {
	case run != nil && script != nil:
		l.errorf(script.NameRange, "Both run and script",
			"provision %q sets run at %s; a step runs one command: set run or script.", p.Name, rangeString(run.NameRange))
	case run != nil:
		items, ok := l.attrStrings(run)
		if ok && len(items) == 0 {
			l.errorf(run.Expr.Range(), "Empty command", "run is the command's argument vector, as in [\"sh\", \"-c\", \"...\"]; it needs at least the program.")
		}
		for _, it := range items {
			p.Run = append(p.Run, it.Value)
		}
		if len(p.Run) > 0 && p.Run[0] == "" {
			l.errorf(run.Expr.Range(), "Empty command", "The program, run's first element, is empty.")
		}
	case script != nil:
		if s, ok := l.attrString(script); ok {
			if s == "" {
				l.errorf(script.Expr.Range(), "Empty script", "provision %q has an empty script.", p.Name)
			}
			p.Script = s
			p.Run = []string{"/bin/sh", "-ec", s}
		}
	default:
		l.errorf(b.DefRange, "Missing command",
			"provision %q runs nothing: set run = [\"sh\", \"-c\", \"...\"] or script = \"...\".", p.Name)
	}
	if a := content.Attributes["env"]; a != nil {
		p.Env, _ = l.attrEnv(a)
	}
	if a := content.Attributes["timeout"]; a != nil {
		if s, ok := l.attrString(a); ok {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				l.errorf(a.Expr.Range(), "Invalid timeout", "timeout is a duration such as \"90s\" or \"10m\": %v.", err)
			case d <= 0 || d > MaxProvisionTimeout:
				l.errorf(a.Expr.Range(), "Invalid timeout", "timeout must be more than 0 and at most %s; %q is not.", MaxProvisionTimeout, s)
			default:
				p.Timeout = d
			}
		}
	}
	for i, eb := range content.Blocks {
		if i > 0 {
			l.errorf(eb.DefRange, "Duplicate egress block",
				"provision %q already has an egress block at %s; put all its rules in one.", p.Name, rangeString(content.Blocks[0].DefRange))
			continue
		}
		e := &Egress{DeclRange: eb.DefRange}
		l.decodeEgressBody(eb.Body, e, "image."+img.Name+".provision."+p.Name)
		p.Egress = policy.Sandbox{Allow: e.Allow, TCP: e.TCP, Hosts: e.Hosts, CAs: e.CAs}
	}
	return p
}

// validStepName reports whether s is a provision step's name.
func validStepName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_'):
		default:
			return false
		}
	}
	return true
}
