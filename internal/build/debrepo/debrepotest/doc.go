// Package debrepotest builds signed Debian repositories for tests: .deb
// files made in Go (ar, control.tar.gz, data.tar.xz), a Packages.xz index
// and an InRelease signed with an OpenPGP key made for the test, served
// over TLS on loopback by net/http/httptest. Production code never
// imports it.
package debrepotest
