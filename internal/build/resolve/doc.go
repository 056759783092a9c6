// Package resolve turns every source of a configuration into a pin: the
// work of `sbx lock`. OCI references become an index digest and the
// platform's manifest digest, npm specs an exact version with its
// integrity and tarball sha256, https URLs and local files a sha256,
// Debian packages an exact version with the .deb's sha256: the version
// the source names, or apt's candidate (apt-cache policy) when it names
// none or names relations the candidate satisfies, else the newest
// version apt offers that satisfies them; a kernel naming a meta package
// (linux-image-amd64) is followed to the package it depends on. Every byte
// downloaded is verified before anything is recorded, and no pin names
// a registry or mirror: those come from the user's npm, apt and registry
// configuration whenever the sources are fetched.
//
// Local sources (file: and oci-layout:) are read only inside the
// directory lang.Source.LocalRoot confines them to, through package
// internal/build/localsrc, so that neither ".." nor a symbolic link leads to a
// host file the spec does not name. What it shares with fetching lives in
// small packages both import: localsrc, npmreg (finding npm tarballs the
// way the user's npm would), apt (the host's apt-get and apt-cache),
// download (verified https downloads) and digest (sha256 of files and
// the mismatch error).
//
// It does not parse specs (package lang), read or write the lock file
// (package lockfiles), define input hashes (package internal/recipe,
// whose InputHash Lock calls), or keep downloaded bytes: building an
// image fetches its inputs again, by pin (package internal/build/fetch).
//
// The entry point is New, which returns a Set; Set.Lock computes a new
// lock from a configuration and the previous lock, reusing pins whose
// sources did not change, and Set.Resolve pins a single source.
package resolve
