package operation

import (
	"context"

	"github.com/sbx-dev/sbx/internal/apply"
	"github.com/sbx-dev/sbx/internal/plan"
	"github.com/sbx-dev/sbx/internal/state"
)

// Hooks is what an operation tells its caller while it runs, and the one
// question it asks. The command line implements it by printing (package
// command's views); the Go API by collecting or ignoring. An operation
// calls Progress from several goroutines at once; the other methods from
// the goroutine that called the operation.
type Hooks interface {
	// Message reports one line of what the operation did or noticed:
	// a pin the lock file gained, a note that the state lock could not
	// be taken, the secrets handed to a running sandbox.
	Message(line string)
	// ShowPlan shows the plan about to be applied; for a plan with no
	// changes, the secret sources and mount reports that come with it.
	// An error stops the operation before anything changes.
	ShowPlan(p *plan.Plan) error
	// Confirm asks whether to go ahead with the plan just shown. False
	// stops the operation with nothing changed; Confirm reports why
	// itself.
	Confirm(ctx context.Context, question, consequence string) bool
	// Progress reports a change starting or ending.
	Progress(e apply.Event)
	// Applied reports that the changes were applied, as far as they
	// went: what apply counted, and its error (nil when every change
	// was made). It comes before anything apply does afterwards, such
	// as handing running sandboxes their secrets again.
	Applied(res apply.Result, err error)
	// Outputs shows the values of the configuration's output blocks,
	// as an apply that went through recorded them in the state.
	Outputs(outs map[string]*state.Output)
}

// NoHooks is Hooks that shows nothing and approves nothing: an operation
// that needs a confirmation (an apply without a saved plan or
// auto-approve) stops at it.
type NoHooks struct{}

func (NoHooks) Message(string)                               {}
func (NoHooks) ShowPlan(*plan.Plan) error                    { return nil }
func (NoHooks) Progress(apply.Event)                         {}
func (NoHooks) Applied(apply.Result, error)                  {}
func (NoHooks) Outputs(map[string]*state.Output)             {}
func (NoHooks) Confirm(context.Context, string, string) bool { return false }

var _ Hooks = NoHooks{}
