// Package guestconn is the host side of the agent protocol (package
// internal/proto/agentproto): a Client on the byte stream that reaches a guest's
// command server (package guest/execsrv), usually the guest agent's
// virtio-serial port. It runs processes in the guest, streaming their
// stdin, stdout and stderr under flow control, with signals, terminal
// resizes and cancellation; it puts and gets files; it configures the
// guest's network, CA trust and exec defaults (Client.Configure, which a
// sandbox's supervisor sends once it has taken over the agent); and it
// checks the guest is alive. Many calls may run at once on one Client.
//
// The guest is not trusted (docs/security.md): every wait on it ends.
// When a call's context ends, the call returns and the guest is asked to
// cancel the session; a guest that has not ended it CancelGrace later
// loses the connection, which also frees writes blocked on a guest that
// stopped reading. A file got is held to the size the guest announced.
// Text from the guest (error messages, signal names) is returned as the
// guest sent it, except in ExitStatus.String: callers that print it
// quote it (package termtext).
//
// It does not start the guest or open the port (the machine does,
// and hands Dial the connection), and it keeps no guest-side code. It is
// portable Go: the host may be Linux or macOS.
//
// The entry point is Dial; then Client.Exec (or Client.Start and the
// Process it returns), Client.Put, Client.Get, Client.Configure and
// Client.Ping.
package guestconn
