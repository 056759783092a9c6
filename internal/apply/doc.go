// Package apply carries out a plan: it builds the images the plan
// creates or replaces, stops the sandboxes it deletes or replaces, starts
// the sandboxes it creates or replaces — each under a detached
// supervisor process that outlives the caller — and records every change
// in state as it lands, so that an interrupted or failed apply leaves
// state that says truthfully what runs.
//
// Apply executes the plan, not the configuration: a sandbox starts with
// the spec its change's After resolved (pipeline.PlannedSpec: the
// plan's CPUs, memory, user, environments, policy and mount owners, the
// host directories made absolute against the configuration directory)
// booting the image built for the image hash the plan records, and an
// update hands the running sandbox the plan's policy. So a saved plan
// (sbx plan -out) starts what it showed. Only the configuration's
// directory is taken from Options.Config.
//
// Refresh is the other half: before planning, it checks the sandboxes
// state records against the processes that run them, so that a sandbox
// whose supervisor died shows in the plan as one to re-create.
//
// Both find a sandbox in the supervisor directory sbx gives it
// (supervisor.SandboxDir of the runtime base, the configuration's
// directory and the sandbox's name), never in the one state records:
// state lives in the configuration's directory, which an untrusted
// checkout writes. A sandbox recorded elsewhere is reported gone, and
// stopping it is an error; the process ids state records are hints that
// package supervisor verifies before it signals anything.
//
// Deciding what to change is package plan's; building images is
// internal/build/image's (through the Build callback, which the command line
// gives progress output); running a sandbox is package supervisor's;
// holding the state lock and reading the configuration are the caller's.
//
// The entry points are Refresh and Apply.
package apply
