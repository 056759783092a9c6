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
// assertion, never methods every hypervisor must stub: a warm start is
// one (machine.Snapshotter: Save a VM's state to a file, Restore a VM
// started with Spec.Incoming from one), its RAM a file named in
// Spec.Memory.
//
// Package vm only describes: it runs nothing and probes nothing.
package vm
