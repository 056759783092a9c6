// Command netbench measures the sandbox network from inside a guest,
// side by side with the baseline users know, QEMU's own user-mode network
// ("-netdev user"), in one run, so that the ratios hold on a shared,
// noisy machine.
//
// It makes the hermetic sandbox of package internal/machine/machinetest (the
// Debian kernel, busybox and a guest agent built from this tree, in a
// private cache), starts a Go HTTP server on 127.0.0.1 that serves zeros
// of any length, and boots two guests of that image at once:
//
//   - one on the sandbox network (package sandboxnet, as a supervisor
//     runs it), with a policy that allows one name and maps it to the
//     server with a hosts entry; the guest fetches http://bench.test/;
//   - one on QEMU's user-mode network (machine.Bench.UserNetwork, which
//     only comparisons use), configured with QEMU's default addresses;
//     the guest fetches the server through 10.0.2.2, the host's loopback.
//
// After one warm-up round, each of n rounds times, on both guests in
// turn (which goes first alternates), a download of -size bytes with
// busybox "wget -O /dev/null" and a burst of -requests sequential
// requests for 1 KiB in a guest shell loop. Times are the host's, from
// the exec's request to its exit status; the exec round trip of true is
// measured and reported beside them. The server counts the bodies it
// wrote whole, and a download or burst that did not get every one is an
// error, not a sample.
//
// It prints Markdown tables (throughput and requests per second, with
// the ratio sandbox ÷ user-mode) and the raw samples on standard output,
// and its progress on standard error. Every wait has a timeout; on an
// error or an interrupt it stops the guests it started. Run it from the
// repository root, with qemu-system-x86_64 on PATH and apt-get able to
// download the two packages (or the per-user test package cache holding
// them):
//
//	go run ./bench/netbench [-size 1GiB] [-n 3] [-requests 200] [-work DIR]
//
// Booting is package machine's and the sandbox network package
// sandboxnet's; this program only drives and times them.
package main
