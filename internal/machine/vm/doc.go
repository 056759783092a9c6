// Package vm is the hypervisor-neutral description of one sandbox
// virtual machine and of the host that runs it: the vocabulary shared by
// package machine, which says what to run, and each hypervisor that
// runs it (today only internal/machine/qemu).
//
// Spec is what to run, as plain values: the size, the files the guest
// boots, and the unix sockets its devices are wired to (the console,
// the agent's and the further virtio-serial ports, the network device,
// the hypervisor's own control socket). Host says what the host offers
// a guest (the accelerator, and a Note when a better one was not
// usable). Process is a running VM as the machine needs it: its process
// id, its end, and killing it. Power-off goes through the guest agent's
// control port, not the hypervisor, so Process has no such method.
//
// The interface itself, machine.Hypervisor, is declared where it is
// used, in package machine; a hypervisor implements it with these
// types and imports nothing of package machine. Capabilities only some
// hypervisors have are to be separate small interfaces, found by type
// assertion, never methods every hypervisor must stub: a warm start
// (restoring a VM from a snapshot or a migration stream) will be one,
// with the stream named in a field of Spec.
//
// Package vm only describes: it runs nothing and probes nothing.
package vm
