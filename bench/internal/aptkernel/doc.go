// Package aptkernel finds the Debian kernel package the host's apt would
// install for linux-image-amd64, for the benchmarks that build images
// from the host's Debian mirror (bench/imagebench, bench/pkgbench).
//
// It runs apt-cache and reports through errors; it changes nothing on the
// host. The entry point is Package.
package aptkernel
