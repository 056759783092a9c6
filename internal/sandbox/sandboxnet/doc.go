// Package sandboxnet is the network one sandbox has: the egress engine
// (package egress) behind the sandbox's userspace TCP/IP stack (package
// egress/netstack), its audit log (egress/audit), the per-user CA
// (egress/ca), and the brokered secrets' values and placeholders.
//
// New builds it from a sandbox's policy and the values of its secrets
// (ResolveSecrets reads them on the host); Network is what the machine's
// one network device is given (machine.Options.Network), and Configure is
// what the guest agent must be told once it runs (agentproto.Configure:
// its address, route and resolver, the CA to trust, and the placeholders
// in every exec's environment). Update swaps in a new policy or rotated
// secret values while the sandbox runs; a secret keeps its placeholder for
// the life of the Net, so the guest's environment stays right.
//
// Package sandbox starts every sandbox with it — the supervisor's and an
// unsupervised one's (package pipeline) — so that they enforce one
// policy the same way. It never prints; it logs to the
// slog.Logger it is given.
package sandboxnet
