// Package agentproto is the wire contract between sbx on the host and the
// guest agent's command server: the frames both ends exchange over the one
// virtio-serial port that links them, the messages inside those frames, and
// the flow control that keeps one busy session from starving or flooding
// the others. Both ends import it, so they cannot drift apart: the guest
// serves it (package guest/execsrv) and the host speaks it (package
// guestconn). It performs no I/O beyond the reader and writer it is given,
// starts no processes and touches no files.
//
// # Frames
//
// The port is one reliable, ordered byte stream. It carries frames, each a
// fixed 9-byte header followed by a payload:
//
//	offset  size  field
//	0       4     payload length N, big-endian, at most MaxPayload
//	4       1     type (a Type)
//	5       4     stream id, big-endian
//	9       N     payload
//
// Stream 0 is the connection itself (TypeHello, TypePing, TypePong,
// TypeError). Every other stream is one session, an exec, a file
// transfer or a configure request, opened by the host with TypeExec,
// TypeFilePut, TypeFileGet or TypeConfigure on a stream id it has not
// used before on this connection, and ended by the guest with TypeExit
// (exec) or TypeResult (file transfer, configure). Frames for
// a stream that has ended are ignored: they cross the end on the wire.
//
// Control payloads are JSON objects (the message types in this package);
// they are small and rare, and JSON keeps them readable and extensible.
// Data and window payloads, the hot path, are binary: a TypeData payload
// is one Channel byte followed by raw bytes, a TypeWindow payload is one
// Channel byte followed by a 4-byte big-endian credit increment, and a
// TypeEOF payload is one Channel byte. Nothing is base64-encoded or copied
// through an encoder, so a 50 MB stdout costs only the 10 bytes of framing
// per chunk.
//
// # Flow control
//
// Each channel of each session has its own credit, counted in data bytes.
// The sender starts with InitialWindow bytes of credit, may send only as
// many bytes as it has credit for, and stops when it has none; the receiver
// returns credit with TypeWindow once the bytes it buffered have been
// consumed. A receiver therefore never buffers more than InitialWindow
// bytes per channel, the demultiplexing loop never blocks on a slow
// consumer, and a stalled session never stalls another one. A sender that
// overruns its credit breaks the protocol (ErrWindow). Credit tracks the
// sender's side and Inbox the receiver's; both ends use them.
//
// # Sessions
//
// Exec: the host sends TypeExec (an Exec); the guest answers TypeStarted
// (a Started) once the process runs, or TypeExit with an Error if it could
// not start. Stdin flows host to guest on ChanStdin and ends with TypeEOF;
// stdout and stderr flow guest to host on ChanStdout and ChanStderr (a
// PTY session has only ChanStdout). The host may send TypeSignal,
// TypeResize and TypeCancel at any time. TypeExit (an Exit) comes after
// the last output byte and ends the session.
//
// File put: the host sends TypeFilePut (a FilePut), then the content on
// ChanStdin under the same credit rules and TypeEOF; the guest answers
// TypeResult (a Result), which may come early when the write fails.
// File get: the host sends TypeFileGet (a FileGet); the guest answers
// TypeFileInfo (a FileInfo), the content on ChanStdout and TypeResult, or
// TypeResult with an Error alone.
//
// Configure: the host sends TypeConfigure (a Configure) and the guest
// answers TypeResult once it has applied it, or with an Error. A guest
// that cannot read the request answers with an Error too (code
// CodeProtocol) rather than closing the connection. Only guests whose
// hello lists CapConfigure take it; the version stays 1, since older
// guests simply do not announce it.
//
// The connection begins with version negotiation: the host sends TypeHello
// (a Hello listing the versions it speaks), the guest answers TypeHello
// with the version chosen, or TypeError and closes.
//
// Session holds these rules as a state machine: what each end may send
// on a session's stream, on which channels, in what order. The host's
// client checks the guest's frames with it, the guest's server the
// host's, and the supervisor's router both, so a peer that breaks the
// order meets the same refusal wherever it is caught.
//
// The entry points are Conn (framing), the message types, Session,
// Credit and Inbox; Configure.Validate is the one check both ends make of
// a configure request.
package agentproto
