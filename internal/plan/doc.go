// Package plan computes what would change: the desired resources (from a
// lang.Config and its lock) against the last-applied ones (from state, or
// from another revision of the configuration for code review), as a Plan —
// a list of resource changes with Terraform's actions, the attribute
// differences behind them, whether each applies in place to a running
// sandbox or forces replacement, and every policy change classified as
// widening or narrowing (by policy.Compare).
//
// Entry points: Desired turns a configuration and its lock into the
// resources it asks for; FromState plans those against the state in .sbx/;
// Against plans one revision of a configuration against another without
// state, for review, and AgainstSides does so where a revision has no lock
// file (its image inputs compared by source string, the plan naming it in
// Plan.Unlocked). All use Compute (resources to changes), which callers
// may also use directly.
//
// InspectMounts reports what each mount of the desired sandboxes shows of
// its host directory now — the files its hide rules hide, the visible
// files that look like secrets — for Plan.Mounts; it walks the checkout
// with bounds and without following links, matching paths with
// policy/match, the rule language the file server enforces, so that the
// plan shows what the file server will hide, on every OS.
//
// A Plan is data: it is rendered for people (Render) or as versioned JSON
// (MarshalJSON, documented in docs/plan-json.md), saved with WriteFile and
// read back with ReadFile by show and apply.
//
// This package does not resolve sources (internal/build/resolve does, and
// package lockfiles stores the pins), read or write state (package state),
// check out git revisions or parse flags (cmd/sbx), or execute a plan
// (package apply). It never prints: Render writes to the writer it is given.
package plan
