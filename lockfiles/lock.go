package lockfiles

// FileName is the lock file's name inside a configuration directory.
const FileName = "sbx.lock.hcl"

// Lock is the content of a lock file.
type Lock struct {
	// Images is keyed by image block name.
	Images map[string]*Image
}

// Image is the lock entry of one image block.
type Image struct {
	Name     string
	Platform string // "linux/amd64"
	// InputHash is "sha256:<hex>" over the image's recipe: every pin and
	// every setting that affects the image bytes (see builders/recipe).
	InputHash string
	// Inputs are the pins of every source the image uses, keyed by the
	// input's role: "base", "kernel", "artifact.NAME".
	Inputs map[string]*Pin
	// Outputs maps an output name ("kernel", "initramfs", "disk") to
	// "sha256:<hex>" of the built file. Empty until a build has run.
	Outputs map[string]string
}

// Pin is a resolved source. Which fields are set depends on Kind (the
// lang.SourceKind string):
//
//	oci, oci-layout  Digest = index (or single manifest) digest,
//	                 Manifest = per-platform manifest digest
//	npm              Version = exact version, Integrity = registry "sha512-…",
//	                 SHA256 = tarball sha256
//	url, file        SHA256 = content sha256
//	deb              Version = exact version, SHA256 = .deb sha256,
//	                 Filename = the package's file name (no mirror address)
//
// A pin never records a registry or mirror host: those come from the
// user's own npm and apt configuration at fetch time.
type Pin struct {
	Source    string // the source string as written in the spec
	Kind      string
	Digest    string
	Manifest  string
	Version   string
	Integrity string
	SHA256    string
	Filename  string
}
