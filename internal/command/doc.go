// Package command implements the sbx command line: one function per verb
// (validate, fmt, lock, plan, build, run, exec, show, doctor, version,
// completion, help, and the hidden supervise and __complete), each parsing its
// flags into a small struct, orchestrating the library packages, and
// printing one view of the result. It is the only package that prints
// diagnostics, picks colours or chooses exit codes.
//
// It holds no configuration, resolution or planning logic of its own:
// package lang loads specs, state holds what was applied, and plan
// computes and renders changes; package operation sequences lock, plan,
// apply and destroy (with lock repair, output hashes and log following)
// as the Go API does, reporting through the operation.Hooks this package
// implements with its views; package pipeline locks (internal/build/resolve,
// lockfiles), builds (internal/build/image) and starts sandboxes (machine) by the
// same path the Go API takes, with the options read from Env. Every
// error and warning it prints — the spec's, an operation's, a usage
// error's — is a diagnostic printed through diags.Render: "Error:
// summary", a blank line, the detail. A usage error (usage.go) names what
// is wrong in its summary ("Invalid -parallelism", "Unknown option -x",
// "Conflicting options", "Invalid arguments"), says it with the value
// given in its detail, and ends with Run "sbx VERB -h" for its options;
// package flag's errors are printed the same way (flagError).
//
// The entry point is Run, which cmd/sbx calls with the process's arguments,
// streams and environment; tests call it the same way with buffers.
//
// Exit codes: 0 success (and, for plan -detailed-exitcode, no changes);
// 1 an error; 2 plan -detailed-exitcode found changes, or doctor found
// warnings but no failures; 3 fmt -check found
// files that are not formatted. run and exec exit with the guest
// command's code, 128 plus a killing signal's number, 124 on -timeout,
// and, as shells do, 127 for a command the guest does not have and 126
// for one it cannot execute; 130 is an interrupt (Ctrl-C, SIGTERM), after
// which the command says "Interrupted" and what it left as it was.
package command
