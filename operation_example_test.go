package sbx_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sbx-dev/sbx"
)

// A program plans a configuration, shows the plan, refuses one that
// widens a sandbox's policy, and applies it: the sandboxes keep running
// under their supervisors after it exits, as after sbx apply.
func ExampleConfig_Apply() {
	ctx := context.Background()
	cfg, err := sbx.Load(dir, sbx.Options{Environ: environ})
	if err != nil {
		log.Fatal(err)
	}
	p, err := cfg.Plan(ctx, sbx.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range p.Changes {
		fmt.Println(c.Action, c.Address)
	}
	if p.Widens() {
		log.Fatal("the plan widens a sandbox's policy; review it first")
	}
	res, err := cfg.Apply(ctx, p, sbx.ApplyOptions{SupervisorCommand: []string{"sbx", "supervise"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d created, %d replaced, %d destroyed\n", res.Created, res.Replaced, res.Destroyed)
}
