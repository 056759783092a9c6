// Package apt downloads Debian packages and lists their versions through
// the host's own apt: `apt-get download`, which needs no root and checks
// each package against the signed indexes, and `apt-cache policy`. sbx
// never names a mirror; which sources apt reads is the machine's
// configuration.
//
// Downloader and Lister are the two small interfaces locking (package
// internal/build/resolve) and fetching (package internal/build/fetch) take, so that
// their tests can put a local package store in apt's place; Get is the
// implementation that runs apt. Package apttest keeps real packages in a
// per-user cache for tests that need them.
//
// Package apt does not read .deb files (package internal/build/archive does) or
// choose versions (package internal/build/resolve does, from what Lister
// returns).
//
// The entry point is Get.
package apt
