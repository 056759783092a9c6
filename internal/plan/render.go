package plan

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/policy"
)

// RenderOptions control the text rendering of a plan.
type RenderOptions struct {
	// Color adds ANSI colours (actions, widening markers, "forces
	// replacement"). Off for files, pipes and golden tests.
	Color bool
	// Width is the terminal width. When set, a policy line that would be
	// wider puts its origin on a line of its own. 0 means unlimited.
	Width int
}

// Render writes the plan for people, in the style of terraform plan: a
// legend of the action symbols used, one block per changed resource with
// the attribute differences ("# forces replacement" where one does) and
// the classified policy changes with their origins, then the summary
// lines. A note before them names each side with no lock file
// (Plan.Unlocked). Unchanged resources are not shown. Hashes are abbreviated; the
// JSON form (MarshalJSON) carries them in full. A change's reason, which
// may quote a sandbox's runtime (its supervisor's error, its console), is
// escaped to one line by package termtext. Then comes where this host
// reads each secret (Plan.Secrets), and last what each mount shows of
// its host directory (Plan.Mounts; RenderMounts).
func Render(w io.Writer, p *Plan, opts RenderOptions) error {
	bw := bufio.NewWriter(w)
	r := &renderer{w: bw, opts: opts}
	r.plan(p)
	if p != nil {
		r.secrets(p.Secrets)
		r.mounts(p.Mounts)
	}
	return bw.Flush()
}

type renderer struct {
	w    *bufio.Writer
	opts RenderOptions
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

func (r *renderer) color(code, s string) string {
	if !r.opts.Color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (r *renderer) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

// symbol renders an action's marker padded to three columns.
func (r *renderer) symbol(a Action) string {
	switch a {
	case Create:
		return "  " + r.color(ansiGreen, "+")
	case Update:
		return "  " + r.color(ansiYellow, "~")
	case Replace:
		return r.color(ansiRed, "-") + "/" + r.color(ansiGreen, "+")
	case Delete:
		return "  " + r.color(ansiRed, "-")
	}
	return "   "
}

var legend = []struct {
	action Action
	text   string
}{
	{Create, "create"},
	{Update, "update in-place (policy applies to the running sandbox)"},
	{Replace, "destroy and then create replacement"},
	{Delete, "destroy"},
}

func (r *renderer) plan(p *Plan) {
	if p != nil {
		for _, side := range p.Unlocked {
			r.printf("Note: %s has no %s, so its image inputs are unlocked.\n"+
				"  Images are compared by their specs, with each input's source string in place\n"+
				"  of its pin; content a source resolves to differently is not shown.\n\n",
				termtext.Line(side), lockfiles.FileName)
		}
	}
	if !p.HasChanges() {
		if p != nil && p.Against != "" && p.Against != "state" {
			r.printf("No changes. The configuration matches %s.\n", p.Against)
		} else {
			r.printf("No changes. Your sandboxes match the configuration.\n")
		}
		return
	}
	used := map[Action]bool{}
	for _, c := range p.Changes {
		used[c.Action] = true
	}
	r.printf("Resource actions are indicated with the following symbols:\n")
	for _, l := range legend {
		if used[l.action] {
			r.printf("%s %s\n", r.symbol(l.action), l.text)
		}
	}
	r.printf("\n")
	if p.Against != "" && p.Against != "state" {
		r.printf("Compared with %s, this configuration would perform the following actions:\n", p.Against)
	} else {
		r.printf("sbx will perform the following actions:\n")
	}
	for _, c := range p.Changes {
		if c.Action == NoOp {
			continue
		}
		r.printf("\n")
		r.resource(c)
	}
	s := p.Summary()
	r.printf("\n%s %d to add, %d to change, %d to replace, %d to destroy.\n",
		r.color(ansiBold, "Plan:"), s.Add, s.Change, s.Replace, s.Destroy)
	widen := fmt.Sprintf("%d widening", s.Widen)
	if s.Widen > 0 {
		widen = r.color(ansiRed, widen)
	}
	r.printf("%s %s, %d narrowing.\n", r.color(ansiBold, "Policy:"), widen, s.Narrow)
}

func (r *renderer) resource(c *ResourceChange) {
	var what string
	switch c.Action {
	case Create:
		what = "will be created"
	case Update:
		what = "will be updated in place"
	case Replace:
		what = "must be replaced"
	case Delete:
		what = "will be destroyed"
	}
	head := fmt.Sprintf("# %s %s", c.Addr, what)
	if c.Reason != "" {
		// A reason may quote a sandbox's runtime (Runtime.Gone: the
		// supervisor's error, the VM's console), read back from a state
		// file: escaped to one line, it cannot start plan lines of its
		// own or drive the terminal.
		head += " because " + termtext.Line(c.Reason)
	}
	r.printf("  %s\n", r.color(ansiBold, head))
	r.printf("%s %s %q {\n", r.symbol(c.Action), c.Addr.Kind, c.Addr.Name)

	width := 0
	for _, a := range c.Attrs {
		width = max(width, utf8.RuneCountInString(a.Path))
	}
	for _, a := range c.Attrs {
		r.attr(a, width)
	}
	if len(c.Policy) > 0 {
		r.policy(c)
	}
	r.printf("    }\n")
}

func (r *renderer) attr(a AttrChange, width int) {
	pad := strings.Repeat(" ", width-utf8.RuneCountInString(a.Path))
	var sym, val string
	switch {
	case a.Before == "":
		sym = r.color(ansiGreen, "+")
		val = displayValue(a.Path, a.After)
	case a.After == "":
		sym = r.color(ansiRed, "-")
		val = displayValue(a.Path, a.Before) + " -> null"
	default:
		sym = r.color(ansiYellow, "~")
		val = displayValue(a.Path, a.Before) + " -> " + displayValue(a.Path, a.After)
	}
	line := fmt.Sprintf("      %s %s%s = %s", sym, a.Path, pad, val)
	if a.ForcesReplacement {
		line += " " + r.color(ansiRed, "# forces replacement")
	}
	r.printf("%s\n", line)
}

// displayValue quotes a rendered attribute value (numbers stay bare) and
// abbreviates hashes.
func displayValue(path, v string) string {
	if path == "cpus" {
		if _, err := strconv.Atoi(v); err == nil {
			return v
		}
	}
	return strconv.Quote(abbreviate(v))
}

// abbreviate shortens "sha256:<64 hex>" to its first 12 hex digits.
func abbreviate(v string) string {
	const prefix, keep = "sha256:", 12
	if strings.HasPrefix(v, prefix) && len(v) > len(prefix)+keep {
		return v[:len(prefix)+keep] + "…"
	}
	return v
}

func (r *renderer) policy(c *ResourceChange) {
	sym := r.color(ansiYellow, "~")
	if c.Action == Create {
		sym = r.color(ansiGreen, "+")
	}
	r.printf("      %s policy {\n", sym)
	// Origins line up in one column, except after a detail so long that
	// aligning to it would push every other origin off the screen.
	const alignLimit = 60
	width := 0
	for _, pc := range c.Policy {
		if n := utf8.RuneCountInString(termtext.Line(pc.Detail)); n <= alignLimit {
			width = max(width, n)
		}
	}
	const indent = "          "
	for _, pc := range c.Policy {
		var op string
		switch pc.Op {
		case policy.RuleAdded:
			op = r.color(ansiGreen, "+")
		case policy.RuleRemoved:
			op = r.color(ansiRed, "-")
		default:
			op = r.color(ansiYellow, "~")
		}
		marker := "         "
		switch pc.Direction {
		case policy.Widen:
			marker = r.color(ansiRed, "[widens] ")
		case policy.Narrow:
			marker = r.color(ansiGreen, "[narrows]")
		}
		// Details and origins come from the configuration (rule values,
		// file names), which a pull request writes: escaped to one line,
		// they cannot draw plan lines of their own or drive the terminal.
		detail := termtext.Line(pc.Detail)
		origin := termtext.Line(originString(pc.Origin))
		pad := strings.Repeat(" ", max(0, width-utf8.RuneCountInString(detail)))
		plain := indent + "+ [narrows] " + detail + pad + "  # " + origin
		switch {
		case origin == "":
			r.printf("%s%s %s %s\n", indent, op, marker, detail)
		case r.opts.Width > 0 && utf8.RuneCountInString(plain) > r.opts.Width:
			r.printf("%s%s %s %s\n", indent, op, marker, detail)
			r.printf("%s            # %s\n", indent, origin)
		default:
			r.printf("%s%s %s %s%s  # %s\n", indent, op, marker, detail, pad, origin)
		}
	}
	r.printf("        }\n")
}

// originString renders "egress.llm, main.hcl:12".
func originString(o policy.Origin) string {
	s := o.Block
	if o.File != "" {
		loc := o.File
		if o.Line > 0 {
			loc += ":" + strconv.Itoa(o.Line)
		}
		if s != "" {
			s += ", "
		}
		s += loc
	}
	return s
}
