// Package apkrepotest builds signed Alpine repositories for tests: .apk
// files made in Go the way abuild makes them (a signature, a control and
// a data gzip member), an APKINDEX.tar.gz signed the way apk index
// signs it, with RSA keys made for the test, served over TLS on loopback
// by net/http/httptest. Production code never imports it.
package apkrepotest
