// Package fetch brings every input of a locked image into the
// content-addressed cache (package internal/build/cache), by pin, verifying
// each byte before it is kept: OCI images (registry references and local
// OCI layouts) as their platform manifest, config blob and compressed
// layer blobs; npm tarballs, checked against both the pinned sha256 and
// the pinned integrity, from the registry the user's npm configuration
// names; https URLs; local files; and Debian packages through apt. Local
// files and layouts are read inside their confining directory (package
// internal/build/localsrc), never through a symbolic link out of it; npm
// registries are found as the user's npm would (package internal/build/npmreg),
// and Debian packages come through the host's apt (package internal/build/apt).
//
// What is already in the cache is not fetched again, so a warm cache
// touches no network at all: not even a registry's version check. A
// download that is cut short, or whose bytes do not hash to the pin,
// leaves nothing behind, and the error names the input and both hashes.
// Progress is reported through an optional callback so that the CLI can
// draw it; this package never prints.
//
// Package fetch does not choose pins (package internal/build/resolve does, for
// `sbx lock`; the two share those packages, and fetch does not import
// resolve), does not unpack what it fetches (package internal/build/archive
// reads archives, package internal/build/layers flattens image layers) and does
// not build images.
//
// The entry point is Inputs.
package fetch
