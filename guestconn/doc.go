// Package guestconn is the host side of the agent protocol (package
// guest/agentproto): a Client on the byte stream that reaches a guest's
// command server (package guest/execsrv), usually the guest agent's
// virtio-serial port. It runs processes in the guest, streaming their
// stdin, stdout and stderr under flow control, with signals, terminal
// resizes and cancellation; it puts and gets files; and it checks the
// guest is alive. Many calls may run at once on one Client.
//
// It does not start the guest or open the port (the QEMU provider does,
// and hands Dial the connection), and it keeps no guest-side code. It is
// portable Go: the host may be Linux or macOS.
//
// The entry point is Dial; then Client.Exec (or Client.Start and the
// Process it returns), Client.Put, Client.Get and Client.Ping.
package guestconn
