// Package e2etest holds the end-to-end tests of sbx and nothing else:
// each test boots real QEMU VMs (under TCG where KVM is unusable) and
// drives sbx through its Go API (package sbx: Load, Start, Sandbox.Exec,
// Config.Plan and Config.Apply) or its command line (internal/command),
// then checks what reached the guest, the host and the network: the
// egress rules and credential masking with the real Claude Code and
// Codex against local fake APIs, request rules against raw HTTP/1.1 and
// HTTP/2 tricks, workspace mounts (hidden paths, git metadata, file
// modes, commands run from a mount), packages, plan and apply, and sbx
// eval. A few tests check, on the host alone, the fakes the VM tests
// talk to (TestCodexReply, TestCodexOnHost); they run and skip with the
// rest.
//
// The suite fails, naming what to install, when qemu-system-x86_64 is
// not on PATH, so that a green `go test ./...` always means the VMs
// booted; SBX_SKIP_VM_TESTS=1 runs none of it instead, saying so (see
// package internal/machine/qemu/qemutest). Tests that need more than
// QEMU say what: those building from Debian's packages skip when the
// host has no apt sources, and fail without a host git.
//
// TestMain builds the hermetic fixture of package
// internal/machine/machinetest once for the whole package; the tests'
// own specs are under testdata/. The unit tests of each layer live with
// that layer; the Go API's runnable examples stay in the root package.
//
// Run one test with, for example,
//
//	go test -count=1 -run '^TestEvalInVM$' -v ./internal/e2etest
package e2etest
