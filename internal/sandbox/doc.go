// Package boot starts a sandbox's machine with everything the host gives
// it: its network with the egress policy enforced (package sandboxnet),
// its workspace mounts' file servers (package sandboxfs), and the guest
// told about both before anything runs there. The supervisor and
// pipeline.Start (sbx run, the Go API) both start sandboxes through it.
package sandbox
