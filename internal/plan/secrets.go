package plan

import (
	"bufio"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sbx-dev/sbx/internal/bindings"
	"github.com/sbx-dev/sbx/internal/termtext"
	"github.com/sbx-dev/sbx/lang"
	"github.com/sbx-dev/sbx/policy"
)

// SecretReport says where this host reads the value of one secret of the
// desired sandboxes when one of them starts: which kind of source, and
// whether the spec or the user's bindings file names it, and where. It
// never holds a value, nor a command's text (which may carry a token).
type SecretReport struct {
	// Secret is the secret block's name.
	Secret string `json:"secret"`
	// Sandboxes are the sandboxes that use it, sorted.
	Sandboxes []string `json:"sandboxes"`
	// Kind is "env", "file" or "command"; empty when there is no source
	// this host may read (Problem says why).
	Kind string `json:"kind,omitempty"`
	// Source is an env: or file: source as written; empty for a
	// command.
	Source string `json:"source,omitempty"`
	// From is "spec" or "bindings"; empty with Kind.
	From string `json:"from,omitempty"`
	// Origin is where the source is written: the secret block (file
	// relative to the configuration directory) or the binding (the
	// bindings file's path, "~" for the home directory). With Problem,
	// the secret block.
	Origin policy.Origin `json:"origin"`
	// Problem says why the secret has no source this host may read:
	// starting a sandbox that uses it fails.
	Problem string `json:"problem,omitempty"`
}

// SecretSources reports, for each secret the sandboxes of cfg use, the
// source this host would read it from (bindings.Choose with f, the
// user's bindings file; nil means none), sorted by secret name. Like
// Plan.Mounts, this is not a change of any sandbox: a binding is the
// host's, and changing it changes where a value comes from, not where it
// may go, so it neither updates nor replaces anything (sbx apply hands
// running sandboxes their secrets again). It reads no value and runs no
// command.
func SecretSources(cfg *lang.Config, f *bindings.File) []SecretReport {
	byName := map[string]*SecretReport{}
	for _, sbName := range slices.Sorted(maps.Keys(cfg.Sandboxes)) {
		sb := cfg.Sandboxes[sbName]
		for _, s := range sb.Policy.Secrets {
			if r := byName[s.Name]; r != nil {
				r.Sandboxes = append(r.Sandboxes, sb.Addr().String())
				continue
			}
			r := &SecretReport{Secret: s.Name, Sandboxes: []string{sb.Addr().String()}}
			c := bindings.Choose(f, cfg.Dir, s)
			r.Origin = c.Origin
			switch {
			case c.Err != nil:
				r.Problem = problem(s, f)
			default:
				r.Kind, r.From = c.Kind(), string(c.From)
				if r.Kind != "command" {
					r.Source = c.Written
				}
				if c.From == bindings.FromBindings {
					r.Origin.File = f.ShortPath()
				}
			}
			byName[s.Name] = r
		}
	}
	var out []SecretReport
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// problem says in one line why secret s has no source: the report's
// line, where the error at start says what to add.
func problem(s policy.SecretBinding, f *bindings.File) string {
	where := "the bindings file"
	if p := f.ShortPath(); p != "" {
		where = p
	}
	if s.Source != "" {
		return "the spec's source is a command, which sbx never runs; bind secret." + s.Name + " in " + where
	}
	return "the spec names no source; bind secret." + s.Name + " in " + where
}

// RenderSecrets writes the secret reports as Render writes them after a
// plan's changes. Apply uses it, with RenderMounts, when there is nothing
// to change: it reads the running sandboxes' secrets again all the same.
func RenderSecrets(w io.Writer, reports []SecretReport, opts RenderOptions) error {
	bw := bufio.NewWriter(w)
	r := &renderer{w: bw, opts: opts}
	r.secrets(reports)
	return bw.Flush()
}

// secrets renders the secret reports: one line per secret, its source's
// kind (an env: or file: source in full, a command as "command" only)
// and where it is written, then the sandboxes that use it; a secret with
// no source this host may read is marked "!" with the reason, and a
// warning counts them.
func (r *renderer) secrets(reports []SecretReport) {
	if len(reports) == 0 {
		return
	}
	r.printf("\nSecrets, and where this host reads each when a sandbox starts:\n\n")
	width := 0
	for _, s := range reports {
		width = max(width, utf8.RuneCountInString(termtext.Line(s.Secret)))
	}
	unbound := 0
	for _, s := range reports {
		name := termtext.Line(s.Secret)
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(name))
		used := "for " + strings.Join(s.Sandboxes, ", ")
		if s.Problem != "" {
			unbound++
			where := ""
			if o := originString(policy.Origin{File: s.Origin.File, Line: s.Origin.Line}); o != "" {
				where = " (" + termtext.Line(o) + ")"
			}
			r.printf("%s secret.%s:%s none%s: %s; %s\n", r.color(ansiRed, "!"), name, pad, where, termtext.Line(s.Problem), used)
			continue
		}
		what := s.Kind
		if s.Source != "" {
			what = s.Source
		}
		loc := originString(policy.Origin{File: s.Origin.File, Line: s.Origin.Line})
		if s.From == string(bindings.FromBindings) {
			loc = "bindings " + loc
		}
		r.printf("  secret.%s:%s %s (%s), %s\n", name, pad, termtext.Line(what), termtext.Line(loc), used)
	}
	if unbound > 0 {
		r.printf("\n%s %s no source this host may read: starting a sandbox that uses %s fails, saying what to bind.\n",
			r.color(ansiBold+ansiYellow, "Warning:"), countOf(unbound, "secret has", "secrets have"), pronounFor(unbound))
	}
}
