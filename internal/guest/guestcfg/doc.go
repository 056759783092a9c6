// Package guestcfg applies the host's configure request
// (agentproto.Configure) inside the guest and keeps what it set for the
// agent's later execs: the network interface, address and default route
// (through package guest/netcfg), /etc/resolv.conf and /etc/hosts, the
// sandbox CA in /etc/sbx/ca.crt and in the system bundle, and the
// environment every exec gets by default (the CA variables and the
// placeholders of brokered secrets). The CA also goes where Debian's
// update-ca-certificates looks for local CAs, so a package install that
// rebuilds the bundle keeps it.
//
// A State outlives the agent's connections: the supervisor that takes
// over the agent after boot configures it once, and a later connection
// (a restarted supervisor) finds the same defaults. A second Configure
// replaces the first. A request is validated whole before anything is
// changed, so a malformed one changes nothing.
//
// It does not speak the protocol (package guest/execsrv hands it the
// request and asks it for the defaults), decide the configuration (the
// host's supervisor does) or check what an exec overrides (the
// supervisor refuses a client exec that overrides a placeholder's
// name). Files are written under a root directory, so tests run it
// against a temporary one, with the network step replaced.
//
// The entry point is New.
package guestcfg
