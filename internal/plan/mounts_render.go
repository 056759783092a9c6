package plan

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sbx-dev/sbx/internal/termtext"
)

// RenderMounts writes the mount reports as Render ends a plan with them:
// per mount, the host paths each hide rule hides and the visible files
// that look like secrets, then a warning line counting those. Apply uses
// it alone when there is nothing to change, since the host files may have
// changed under a running sandbox all the same.
func RenderMounts(w io.Writer, reports []MountReport, opts RenderOptions) error {
	bw := bufio.NewWriter(w)
	r := &renderer{w: bw, opts: opts}
	r.mounts(reports)
	return bw.Flush()
}

func (r *renderer) mounts(reports []MountReport) {
	if len(reports) == 0 {
		return
	}
	r.printf("\nMounts, with the host files as they are now:\n")
	secrets, unchecked := 0, 0
	for _, m := range reports {
		r.printf("\n")
		r.mount(m)
		secrets += len(m.Secrets) + m.SecretsMore
		if m.Problem != "" || m.Truncated != "" {
			unchecked++
		}
	}
	if secrets > 0 {
		r.printf("\n%s %s visible in the guest. Hide %s with a mount's hide rules, or move %s out of the mounted directory.\n",
			r.color(ansiBold+ansiYellow, "Warning:"), countFiles(secrets, "that looks like a secret is", "that look like secrets are"),
			pronounFor(secrets), pronounFor(secrets))
	}
	if unchecked > 0 {
		r.printf("\n%s %s could not be checked in full; see the lines marked \"!\" above.\n",
			r.color(ansiBold+ansiYellow, "Warning:"), countOf(unchecked, "mount", "mounts"))
	}
}

func (r *renderer) mount(m MountReport) {
	head := fmt.Sprintf("%s <- %s", m.Guest, strconv.Quote(m.Host))
	if m.Outside {
		head += ", outside the configuration directory"
	}
	head = termtext.Line(head)
	if o := termtext.Line(originString(m.Origin)); o != "" {
		head += " (" + o + ")"
	}
	if len(m.Sandboxes) > 0 {
		head += ", in " + termtext.Line(strings.Join(m.Sandboxes, ", "))
	}
	r.printf("  %s\n", r.color(ansiBold, head))
	warn := r.color(ansiYellow, "!")
	if m.Problem != "" {
		line := termtext.Line(m.Problem)
		if o := termtext.Line(originString(m.Origin)); o != "" {
			line += " (" + o + ")"
		}
		r.printf("    %s %s\n", warn, line)
		return
	}
	var idle []string
	for _, h := range m.Hide {
		if len(h.Paths) == 0 {
			idle = append(idle, strconv.Quote(h.Pattern))
			continue
		}
		r.printf("    %s hides:\n", termtext.Line("hide "+strconv.Quote(h.Pattern)))
		for _, p := range h.Paths {
			r.printf("      %s\n", termtext.Line(p))
		}
		if h.More > 0 {
			r.printf("      and %d more\n", h.More)
		}
	}
	switch len(idle) {
	case 0:
	case 1:
		r.printf("    hide %s hides nothing here\n", termtext.Line(idle[0]))
	default:
		r.printf("    hide %s and %s hide nothing here\n", termtext.Line(strings.Join(idle[:len(idle)-1], ", ")), termtext.Line(idle[len(idle)-1]))
	}
	if len(m.Secrets) > 0 {
		r.printf("    %s %s\n", warn, r.color(ansiYellow, "visible, and looks like a secret:"))
		width := 0
		for _, s := range m.Secrets {
			if n := utf8.RuneCountInString(termtext.Line(s.Path)); n <= 40 {
				width = max(width, n)
			}
		}
		for _, s := range m.Secrets {
			p := termtext.Line(s.Path)
			pad := strings.Repeat(" ", max(0, width-utf8.RuneCountInString(p)))
			r.printf("      %s%s  %s\n", p, pad, termtext.Line(s.Kind))
		}
		if m.SecretsMore > 0 {
			r.printf("      and %d more\n", m.SecretsMore)
		}
	}
	if m.Truncated != "" {
		r.printf("    %s %s; what lies beyond was not checked\n", warn, termtext.Line(m.Truncated))
	}
}

func countFiles(n int, one, many string) string {
	if n == 1 {
		return "1 file " + one
	}
	return fmt.Sprintf("%d files %s", n, many)
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func pronounFor(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
