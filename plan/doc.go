// Package plan computes what would change: the desired resources (from a
// lang.Config and its lock) against the last-applied ones (from state, or
// from another revision of the configuration for code review), as a Plan —
// a list of resource changes with Terraform's actions, the attribute
// differences behind them, whether each applies in place to a running
// sandbox or forces replacement, and every policy change classified as
// widening or narrowing.
//
// A Plan is data: it is rendered for people (Render) or as versioned JSON
// (MarshalJSON, documented in docs/plan-json.md), saved with -out and read
// back by show and apply. Executing a plan is package apply's job.
package plan
