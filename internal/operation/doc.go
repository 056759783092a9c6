// Package operation runs sbx's operations on a configuration directory,
// as Terraform's local backend does: the sequencing that the command line
// and the Go API share, with what the caller shows left to a Hooks value.
//
// Its entry points:
//
//   - UpdateLock (sbx lock; with SalvageLock for a lock file a merge
//     left conflict markers in), LockForApply (resolve what is missing,
//     unless read-only) and LockForPlan (resolve nothing);
//   - ReadState, LockState, LockOnly: the state under its lock, the way
//     plan (read-only, falling back to no lock on a read-only file
//     system), apply and destroy need it;
//   - PlanState and SamePlan: a plan against the state, after checking
//     the sandboxes it records, and the check that a saved plan is still
//     the plan; PlanAgainst, a plan against another revision (a
//     directory, or a git revision read by AgainstDir);
//   - Apply: lease → refresh → plan → show → confirm → apply → secrets;
//     starting, replacing and stopping sandboxes is package apply's (and
//     the supervisor's), called as it is;
//   - Destroy and DestroyPlan; RecordOutputs and BuildImage; FollowFile
//     (sbx logs -f); AgainstDir, which reads another revision of the
//     configuration out of git onto disk through an os.Root.
//
// Operations return diagnostics (package diags) rather than printing
// them, report progress and ask for confirmation through Hooks, and never
// exit. They do not parse flags, render plans or choose exit codes:
// package command does, implementing Hooks with its views.
package operation
