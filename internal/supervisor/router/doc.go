// Package router lets many clients share a guest agent's one connection.
//
// A guest agent serves one host connection at a time on its virtio-serial
// port. Router sits on that one connection and speaks the same agent
// protocol (package internal/proto/agentproto) to any number of clients on a unix
// socket: it answers each client's hello with the guest's, gives each
// client session a stream id of its own on the guest connection and
// rewrites stream ids both ways for every frame (flow-control windows
// included), so a guestconn.Client dialled on the supervisor's socket
// works as one dialled on the guest. It checks every client frame and its
// credit, so a client that breaks the protocol is disconnected without
// breaking the connection the others share, and when a client goes, its
// sessions are cancelled in the guest (their processes killed). It checks
// the guest's frames as strictly, since the guest is not trusted: output
// beyond the credit a client granted, or any other frame that breaks the
// protocol, ends the guest connection (ErrGuestProtocol), and the
// supervisor then stops the sandbox. What the router queues for a client is bounded per
// session it opened, so a client that stops reading holds its sessions'
// credit and no more, and one that keeps asking without reading is
// dropped.
//
// The entry points are New and Router.Serve (or ServeConn for one
// client). It never prints; it logs to the slog.Logger in Options.
package router
