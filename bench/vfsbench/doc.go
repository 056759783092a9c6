// Command vfsbench measures a workspace mount from inside a guest, side
// by side with the guest's own disk and with the baseline users know,
// QEMU's own 9p server ("-virtfs local"), in one run of one guest, so
// that the ratios hold on a shared, noisy machine.
//
// It builds an image with Debian's git (the Debian kernel, git and the
// Essential and required packages, through the same pipeline as sbx),
// makes a host tree holding a committed git repository of -gitfiles
// files, and boots one guest (1 vCPU, TCG where there is no KVM) that
// sees that one tree twice:
//
//   - as a sandbox's workspace mount (package sandboxfs, as a supervisor
//     serves it: 9P2000.L over a virtio-serial port, with the hide rules
//     a workspace has), at /mnt/sbx;
//   - through QEMU's export of the same directory
//     (machine.Bench.VirtFS, which only comparisons use), mounted with
//     the same msize and cache mode, at /mnt/virtfs;
//
// and copies the repository to its own disk. After one warm-up round,
// each of n rounds runs on each target in turn (which goes first
// rotates): a sequential write of -size bytes (dd bs=1M conv=fsync), a
// sequential read of it after dropping the guest's page cache, creating,
// stat-ing and unlinking -files empty files, and git status on the
// repository. Times are the guest's, read before and after each command
// in the guest, so the exec's round trip is left out; every command is
// checked (the file's size, the number of files, a clean status) and a
// failed check is an error, not a sample.
//
// It prints a Markdown table (medians, and the sbx mount's figures over
// the disk's and over -virtfs's) and the raw samples on standard output,
// and its progress on standard error. Every wait has a timeout; on an
// error or an interrupt it stops the guest. Run it from the repository
// root as root (QEMU's export shows the host's owners, and the guest
// measures as root), with qemu-system-x86_64 on PATH and the host's apt
// sources able to serve the packages:
//
//	go run ./bench/vfsbench [-size 256MiB] [-files 2000] [-gitfiles 10000] [-n 3] [-work DIR]
//
// Booting is package sandbox's and serving the mount package sandboxfs's;
// this program only drives and times them.
package main
