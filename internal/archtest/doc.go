// Package archtest holds the module's architecture tests and nothing
// else: its tests load the module's packages with
// golang.org/x/tools/go/packages and fail when
//
//   - a package reaches, directly or through its transitive imports, a
//     package a rule forbids it (the table in forbidden_test.go: the
//     egress stack never links the VM layer, the VM layer never the
//     builders, the planner neither the file server nor the builders,
//     the supervisor never the spec language, the public vocabulary
//     nothing internal, the wire contracts only each other and the
//     vocabulary, the guest agent only itself, the wire contracts,
//     internal/hostenv and the vocabulary); the failure names the chain
//     of imports that leads
//     there, A → B → C, and the imports are checked as linux and as
//     darwin build them. A few rules are on direct imports only: no
//     package but the machine's own, the benchmarks and the doctor
//     (internal/hostcheck) imports internal/machine/qemu, and none but
//     the machine's own internal/machine/vm — the layers above reach
//     the hypervisor through machine.Hypervisor;
//   - an exported identifier of a public package (the root package sbx,
//     addrs, lang, platform, policy and below) mentions a type of an
//     internal package, in a function's parameters or results, an
//     exported struct field, a method, an alias, a variable or a
//     constant: a program outside the module could not name it;
//   - the set of public packages (importable packages outside internal/,
//     commands and benchmarks being package main) is not exactly the
//     list in public_test.go: a new public package is a decision, made
//     by editing that list;
//   - a type of the Go API and the internal type it is converted from
//     (sbx.EvalRun and fanout.Run, whose JSON is the eval index, …)
//     differ in their exported fields' names, order, kinds or JSON tags.
//
// It has no code of its own to import; run it with
// go test ./internal/archtest.
package archtest
