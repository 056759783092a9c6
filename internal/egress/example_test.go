package egress_test

import (
	"context"
	"net"

	"github.com/sbx-dev/sbx/internal/egress"
	"github.com/sbx-dev/sbx/internal/egress/audit"
	"github.com/sbx-dev/sbx/internal/egress/ca"
	"github.com/sbx-dev/sbx/internal/egress/netstack"
	"github.com/sbx-dev/sbx/policy"
)

// Example shows how a supervisor wires the engine to a sandbox's network:
// the stack asks the policy in force which names resolve and which
// connections complete, and hands each accepted connection to the engine.
// On a reload, Update swaps the policy and closes what it no longer
// allows; the stack's own refusals go to the same audit log.
func Example() {
	var (
		spec         policy.Sandbox    // the sandbox's effective policy
		values       map[string][]byte // secret name -> value, read with secretsrc
		placeholders map[string]string // secret name -> the guest's placeholder
		dir          string            // the supervisor's directory
	)
	authority, err := ca.New() // ca.LoadOrCreate(ca.DefaultDir()) for real
	if err != nil {
		return
	}
	log, err := audit.Open(dir, audit.Options{})
	if err != nil {
		return
	}
	defer log.Close()
	pol, err := egress.Compile(spec, values, placeholders)
	if err != nil {
		return // an unreadable CA, a missing value: refuse to boot
	}
	eng, err := egress.NewEngine(pol, egress.Options{CA: authority, Audit: log})
	if err != nil {
		return
	}
	_, _ = netstack.New(netstack.Options{
		Resolve: func(name string) bool { return eng.Policy().Resolves(name) },
		Accept:  func(name string, port uint16) bool { return eng.Policy().Accepts(name, port) },
		Handle: func(ctx context.Context, f netstack.Flow, c net.Conn) {
			eng.ServeFlow(ctx, f.Name, f.Port, c)
		},
		Deny: func(d netstack.Denial) {
			log.Log(audit.Entry{Time: d.Time, Proto: d.Proto, Name: d.Name, Dst: d.Dst.String(),
				Decision: audit.DecisionDeny, Reason: d.Reason})
		},
	})
	// The guest's environment gets pol.Placeholders(); machine.Options.Network
	// gets the network.
}
