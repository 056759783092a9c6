// Package download fetches https content and verifies it against what it
// was pinned or declared to be: a sha256, an npm Subresource Integrity
// string, an npm sha1 "shasum", a size. Get streams the body to a writer
// while hashing it and fails on a bad status, a body shorter or longer
// than announced, and any hash that does not match (a
// *digest.MismatchError naming the URL and both hashes).
//
// URLs can carry credentials (a user name can be a token too): every
// message this package makes names a URL through Redact, and
// StripURLError removes net/http's wrapper that would repeat the URL as
// given. HTTPSOnly refuses redirects to plain http, so that content
// trusted on first use cannot be downgraded on the way.
//
// Package download keeps nothing: package internal/build/fetch streams pinned
// inputs into the cache (package internal/build/cache), and package
// internal/build/resolve hashes what it downloads to record pins. It does not
// know registries (package internal/build/npmreg finds npm tarballs).
//
// The entry point is Get.
package download
