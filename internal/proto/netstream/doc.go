// Package netstream reads and writes the framing of QEMU's stream
// network backend ("-netdev stream", the same as the older "-netdev
// socket"): the guest's Ethernet frames travel over one byte stream, a
// unix socket here, each preceded by its length as 4 bytes big-endian.
// There is no other header, no handshake and no message of its own.
//
// It is a package of its own, apart from package machine, because two
// parties speak it: package machine, which owns the socket and by default
// reads and drops every frame (machine.Sink), and the host's userspace
// network stack (package egress), which will read the guest's frames and
// write its answers through the same Reader and Writer without importing
// the machine that booted the guest. Keeping the framing here also lets
// it be tested without a VM.
//
// Package netstream does not look inside frames (no Ethernet, ARP or IP
// parsing; that is the network stack's), does not listen or accept
// (package machine), and does not build QEMU's command line
// (internal/machine/qemu).
//
// The entry points are NewReader and NewWriter.
package netstream
