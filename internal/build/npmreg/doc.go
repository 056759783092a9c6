// Package npmreg finds npm packages the way the user's own npm would: in
// the registry npm's configuration names for the package (the
// environment's npm_config_* variables over the project .npmrc over the
// user's ~/.npmrc, with scoped registries and ${VAR} references), else
// the registry `npm config get registry` prints; and with the credentials
// that configuration holds for that registry's URL prefix.
//
// Lookup fetches a package's document; Package.Tarball names the tarball
// of one of its versions and the request header to fetch it with. The
// header can hold the user's registry token: it is never printed, and no
// message this package makes repeats a URL's credentials.
//
// Package npmreg does not choose versions (package internal/build/resolve does,
// from the document's versions and dist-tags) and does not download or
// verify tarballs (package internal/build/download does, for locking; package
// internal/build/fetch streams them into the cache, for building).
//
// The entry point is New.
package npmreg
