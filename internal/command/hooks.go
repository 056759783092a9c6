package command

import (
	"context"
	"fmt"

	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/operation"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
)

// hooks shows an operation's progress the way sbx's commands print it:
// messages as lines on the view's stdout, plans rendered, confirmation
// asked on the terminal, apply's progress as it goes and its outcome with
// the exit code it means.
type hooks struct {
	ctx context.Context
	env *Env
	v   *view
	out *applyOutput // nil when the operation applies nothing
	// exit is the exit code of the outcome Applied printed.
	exit int
}

var _ operation.Hooks = (*hooks)(nil)

func newHooks(ctx context.Context, env *Env, v *view) *hooks {
	return &hooks{ctx: ctx, env: env, v: v, out: newApplyOutput(v)}
}

func (h *hooks) Message(line string) { h.v.println("%s", line) }

// ShowPlan renders p; a plan with no changes shows only where its
// secrets are read and what its mounts expose.
func (h *hooks) ShowPlan(p *plan.Plan) error {
	opts := plan.RenderOptions{Color: h.v.colorOut, Width: int(h.v.width)}
	if !p.HasChanges() {
		// Nothing changes, but the running sandboxes' secrets are read
		// again, and their mounts are live.
		if err := plan.RenderSecrets(h.v.stdout, p.Secrets, opts); err != nil {
			return err
		}
		return plan.RenderMounts(h.v.stdout, p.Mounts, opts)
	}
	return plan.Render(h.v.stdout, p, opts)
}

func (h *hooks) Confirm(ctx context.Context, question, consequence string) bool {
	return confirm(ctx, h.env, h.v, question, consequence)
}

func (h *hooks) Progress(e apply.Event) { h.out.progress(e) }

func (h *hooks) Applied(res apply.Result, err error) {
	h.exit = h.out.finish(h.v, res, err, h.ctx.Err() != nil)
}

// Outputs prints the outputs as the end of an apply's output.
func (h *hooks) Outputs(outs map[string]*state.Output) {
	fmt.Fprintf(h.env.Stdout, "\n%s\n\n", h.v.bold("Outputs:"))
	writeOutputs(h.env.Stdout, outs)
}
