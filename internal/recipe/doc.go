// Package recipe defines an image's recipe: the ordered list of its inputs
// (base, kernel, artifacts) and the input hash over everything that affects
// the image's bytes — every pin, platform, size, and each artifact's path,
// mode, uid and gid, users, files and environment. Two images with the same
// input hash build to the same bytes, provided the builder applies
// artifacts, users and files in the order Canonical returns.
//
// Entry points: Inputs lists what must be pinned; InputHash computes the
// hash from an image and its pins; CheckLocked and CheckImageLocked say
// whether a lock is up to date for a configuration (for
// -lockfile=readonly).
//
// The recipe does not resolve sources (internal/build/resolve does), does not
// read or write the lock file (lockfiles does) and builds nothing. The lock
// records the hash; plan compares it; the builders key their outputs by it.
package recipe
