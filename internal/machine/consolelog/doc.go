// Package consolelog keeps a virtual machine's serial console on the
// host in bounded space, and reads it back without reading it whole.
//
// A guest writes to its console as much and as fast as it likes; the
// host must neither fill its disk with it nor make the guest wait on the
// host's disk. So:
//
//   - Writer writes the console to a log file of at most Max bytes. When
//     the file is full it is renamed to the same name with ".1" (Rotated),
//     replacing the previous one, and a new file is begun: the log holds
//     the console's last Max to 2×Max bytes, in two files, never more.
//   - Capture copies the console's stream (QEMU's connection) into a
//     Writer through a queue of bounded size, read by one goroutine and
//     written by another. The stream is always read: when the queue is
//     full, because the log cannot keep up, what does not fit is dropped
//     and a line in the log says how much, rather than the guest's
//     console (and a boot waiting on it) being held up by the host.
//   - Tail, CopyTail and Move read and move a log by its end: the last n
//     bytes through one seek, a copy bounded in size, a rename where one
//     is possible. None reads a file whole, so a log left by an older
//     version, or grown by anything else, costs no more than its cap.
//
// Package machine makes QEMU connect the serial console to a unix socket
// and hands the connection to a Capture; package supervisor keeps the log
// of an ended machine (Move) and "sbx logs" prints and follows it.
//
// The entry points are Create and NewCapture.
package consolelog
