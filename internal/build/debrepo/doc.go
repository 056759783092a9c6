// Package debrepo reads Debian package repositories and computes the
// dependency closure of a set of packages.
//
// It holds four things, each usable on its own:
//
//   - Sources: where repositories are. HostSources reads the machine's apt
//     configuration (sources.list, sources.list.d/*.list and *.sources);
//     ParseSources reads one line or deb822 text given by a spec. sbx never
//     names a mirror itself.
//   - Client: fetches dists/SUITE/InRelease, verifies its OpenPGP clear
//     signature against the source's keyring (Signed-By, or the keyring the
//     caller names), fetches COMPONENT/binary-ARCH/Packages.xz (or .gz),
//     checks its size and sha256 against InRelease and parses its stanzas
//     with pault.ag/go/debian/control. Verified InRelease files and indexes
//     are kept in the sbx cache (package internal/build/cache), the indexes by
//     their sha256, so a later lock works offline from what was verified
//     last. Download fetches a pinned .deb by its pool path from the same
//     sources and checks its size and sha256 before anything reads it.
//   - Resolve: the closure of requested packages over an Index — Depends and
//     Pre-Depends with alternatives and version relations, virtual packages
//     and versioned Provides, packages already installed in the base image
//     (its dpkg status), Essential packages when the base has no dpkg
//     database — checked for Conflicts and Breaks among the chosen
//     packages. The result is sorted and does not depend on map order.
//   - Install: unpacks the data trees of pinned .debs into a root file
//     system tree in a fixed order, without running maintainer scripts, and
//     writes what dpkg would have recorded (status, info/*.list,
//     info/*.md5sums) plus the effects sbx reproduces itself (see
//     docs/packages.md).
//
// Package debrepo does not decide what an image holds (package lang reads
// the spec, package internal/build/resolve writes pins into the lock) and does
// not build disks (package internal/build/rootfs and internal/build/ext4 do).
package debrepo
