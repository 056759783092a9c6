// Package netcfg configures the guest's network interfaces the way `ip`
// would, through rtnetlink (the guest has no `ip` binary): the loopback
// interface up, one interface up with an MTU, its address and the
// default route through the sandbox network's gateway. It works on the
// network namespace of the calling thread, so tests run it in a
// namespace of their own on a tap device, never on the host's
// interfaces.
//
// It does not decide the configuration (the host sends it in an
// agentproto.Configure), write /etc/resolv.conf or /etc/hosts, or load
// the virtio_net driver (the boot loads it with the other modules of
// kernel.DefaultModules); package guest/guestcfg applies the whole
// Configure. Messages are built as bytes by pure functions
// (rtnetlink.go), apart from the socket that sends them.
//
// The entry point is Apply.
package netcfg
