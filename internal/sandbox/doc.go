// Package sandbox starts a sandbox: one Spec, one Start, one Sandbox.
//
// A Spec is everything that makes a sandbox what it is — its name, the
// built image to boot, CPUs and memory, the defaults of its commands
// (user, environment), its timeouts, its policy (egress, secrets,
// mounts) and its mounts as they are served (host directories absolute,
// owners as numbers). It names no type of the configuration (package
// lang) or of the image builder (internal/build): its Image has the JSON
// of the builder's result plus the manifest's platform and kernel
// parameters, and BootFiles turns it into the machine's plain
// machine.BootFiles. The layer above makes a Spec (pipeline.SandboxSpec
// or, from a plan, pipeline.PlannedSpec; pipeline.SandboxImage), and a supervisor keeps it as JSON in its
// spec.json, whose field names are therefore a contract. So neither the
// supervisor nor the machine links the language or the builders. Options are what
// belongs to the host and this start instead: where the machine's
// directory goes, the secrets' values, the audit directory, the logger,
// the hypervisor (machine.Hypervisor; nil is QEMU), the CA.
//
// Start opens the workspace mounts' file servers (package sandboxfs),
// builds the network that enforces the egress policy (package
// sandboxnet), boots the machine on both (package machine) and tells the
// guest agent its address, resolver, CA, the secrets' placeholders and
// its mounts before it returns. The Sandbox owns all three: Exec runs a
// command, Update swaps in a new policy while it runs (what a
// supervisor's reload does), Stop stops the machine and closes the
// servers, Done says it has ended. Every way a sandbox starts goes
// through it: the supervisor (sbx apply), pipeline.Start (sbx run, sbx
// eval, the Go API) and the benchmarks, but for the two that measure the
// bare machine against it (netbench's user-mode network, densitybench's
// machine before decision 0009), which call machine.Start.
//
// Options.Bench carries the machine's benchmark-only settings
// (machine.Bench: QEMU's user-mode network, its own 9p export, the
// machine before decision 0009); sandboxes never set it.
//
// The package never prints; it logs to the slog.Logger it is given. It
// does not read configurations, build images (internal/build/image) or
// keep a sandbox running beyond its caller (package supervisor).
package sandbox
