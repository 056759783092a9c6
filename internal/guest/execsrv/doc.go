// Package execsrv is the guest side of the agent protocol (package
// internal/proto/agentproto): the server the guest agent runs on its virtio-serial
// port once the guest has booted. It runs processes for the host, with
// their stdin, stdout and stderr streamed under flow control, their exit
// code or killing signal reported, signals and cancellation delivered to
// their process group, an environment, a working directory and a user of
// the host's choosing, and optionally a pseudo-terminal the host can
// resize; several at once. It also puts and gets files, with mode and
// ownership, and hands the host's configure requests to its Configurer
// (package guest/guestcfg in the agent), whose environment every exec
// then gets as defaults.
//
// Serve takes its file-system root, its user database (Users) and the way
// it waits for processes (Reaper) as parameters, so tests run it on the
// host against a temporary root, with real processes, over a socket pair.
// The Reaper exists because the agent is PID 1 and must reap every
// orphan: it is the one place that waits for children, and Serve gets the
// exit statuses of its own processes from it (see Reaper for the contract;
// InitReaper is PID 1's, ChildWaiter everyone else's).
//
// It does not boot the guest or decide when to serve (package guest does,
// with guest/initsys), it does not open the port (the agent hands Serve a
// connection), and it holds no host-side code: the host's client is
// package guestconn. Processes run on Linux only; elsewhere Serve reports
// errors.ErrUnsupported.
//
// The entry point is Serve.
package execsrv
