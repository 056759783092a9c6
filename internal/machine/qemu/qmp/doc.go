// Package qmp is a client for the QEMU Machine Protocol: the JSON monitor
// through which the machine (internal/machine/qemu) drives a running QEMU.
//
// Dial connects to QMP's unix socket, reads the greeting and negotiates
// capabilities; NewClient does the same over a connection the caller
// made. Client.Execute runs one command and decodes its reply; calls may be
// made from many goroutines at once, each command carrying its own "id"
// and each reply being matched back to its caller by it. Asynchronous
// events (SHUTDOWN, STOP, RESET, ...) arrive on Client.Events.
//
// Replies are read with a json.Decoder straight from the stream, so a reply
// has no size limit (query-qmp-schema alone is over 100 KiB); see
// docs/decisions/0004-qmp-client.md for why sbx has its own client.
//
// It speaks the protocol only: it knows no command's arguments or replies
// beyond the capability negotiation. Starting QEMU and choosing what to ask
// it is package qemu's (internal/machine/qemu).
package qmp
