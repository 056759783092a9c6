// Package pipeline is the one lock → build → start path of sbx: the
// command line (package command), the Go API (package sbx), the test
// fixture (internal/machine/machinetest) and the benchmarks all call it, so that
// they read the same environment and build the same bytes from the same
// spec and lock.
//
//	Lock   sbx.lock.hcl brought up to date (resolve), or checked (read-only)
//	Build  one image as the lock pins it (internal/build/image), with ImageOptions
//	Start  one sandbox from its built image (SandboxSpec, then sandbox.Start)
//
// PlannedSpec is the spec of a sandbox a plan resolved (a change's
// After) booting its built image: what apply starts under a supervisor.
// It equals SandboxSpec for the configuration the plan was made from; a
// test over the examples and the test data checks it.
//
// Env is everything the three read from outside the configuration: the
// environment (SOURCE_DATE_EPOCH, SBX_CACHE_DIR, SBX_GUEST_AGENT, npm and
// apt configuration), the HTTP client, whose transport OCI registries are
// reached through too, and the registry keychain. ImageOptions turns it
// into the options of every build: the cache, the epoch (which must fit
// the 32-bit timestamps of cpio and ext4), the guest agent and fetching.
//
// The package never prints. Lock returns what it found and did as data
// (Locked) with diagnostics, for the caller to phrase; Build and Start
// return errors naming the image or sandbox. It does not record output
// hashes in the lock file (the command does that after a build), plan,
// or supervise a sandbox (packages plan, apply and supervisor).
//
// The entry points are Lock, ImageOptions with Build, Start and
// PlannedSpec.
package pipeline
