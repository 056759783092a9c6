// Package imagereg moves built images to and from OCI registries, so
// that one machine (CI, a developer) builds an image and others (a
// cluster node, a teammate) run the same bytes without building it.
//
// An image travels as one OCI artifact (an image manifest whose
// artifactType is ArtifactType): its config blob is the build's
// image.json (ConfigMediaType), and one layer per output — kernel,
// initramfs, disk, guest agent — holds that file's bytes as they are, so
// each layer's digest is the output's digest that image.json and the
// lock file record. Push uploads a build from the cache; Pull fetches
// one into the cache, where a later build of the same key finds it.
//
// Pull trusts nothing the registry says until it is checked against
// what the caller expects (Want: the lock's input hash and output
// digests): a registry, or whoever can push to it, can serve any bytes,
// so a build whose outputs the lock does not name is refused, and every
// blob is verified by digest as it is stored. An image that does not
// verify leaves nothing in the cache.
//
// Registry credentials come from the keychain given (the user's
// Docker/OCI configuration, as the OCI resolver uses). Package imagereg
// does not build (internal/build/image) or read the lock file
// (lockfiles); its callers do.
//
// The entry points are Push and Pull.
package imagereg
