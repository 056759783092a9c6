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
	// every setting that affects the image bytes (see recipe).
	InputHash string
	// ProvisionHash is "sha256:<hex>" over the image's provision steps
	// (recipe.ProvisionHash), empty for an image without any. Its disk
	// output is then the provisioned disk, whose bytes the steps decide:
	// a rebuild need not give the same.
	ProvisionHash string
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
//	deb-package      one package of an image's packages closure (key
//	                 "package.NAME"): Version, Architecture, SHA256, Size
//	                 (bytes, decimal) and Filename, the .deb's path
//	                 relative to the repository ("pool/main/g/git/…")
//	deb-packages     the request the closure answers (key "packages"):
//	                 Source = the requests as written, Digest = sha256 of
//	                 the requests, repositories and keyring
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
	// Architecture and Size are set for deb-package and apk-package pins
	// only.
	Architecture string
	Size         string
}

// Keys and kinds of an image's package pins.
const (
	PackagesKey      = "packages"
	PackageKeyPrefix = "package."
	KindDebPackage   = "deb-package"
	KindDebPackages  = "deb-packages"
	// An Alpine image's package set: its apk packages pin the whole
	// .apk's sha256 and size, and filename is ARCH/NAME-VERSION.apk.
	KindApkPackage  = "apk-package"
	KindApkPackages = "apk-packages"
)

// Lookup returns the lock entry of the image block name, or nil. l may be
// nil (no lock file).
func (l *Lock) Lookup(name string) *Image {
	if l == nil {
		return nil
	}
	return l.Images[name]
}

// Equal reports whether l and o lock the same images with the same pins,
// hashes and outputs. A nil lock equals an empty one, and a nil map equals
// an empty map.
func (l *Lock) Equal(o *Lock) bool {
	var a, b map[string]*Image
	if l != nil {
		a = l.Images
	}
	if o != nil {
		b = o.Images
	}
	if len(a) != len(b) {
		return false
	}
	for name, img := range a {
		other, ok := b[name]
		if !ok || !img.Equal(other) {
			return false
		}
	}
	return true
}

// Equal reports whether i and o are the same lock entry.
func (i *Image) Equal(o *Image) bool {
	if i == nil || o == nil {
		return i == o
	}
	if i.Name != o.Name || i.Platform != o.Platform || i.InputHash != o.InputHash || i.ProvisionHash != o.ProvisionHash {
		return false
	}
	if len(i.Inputs) != len(o.Inputs) || len(i.Outputs) != len(o.Outputs) {
		return false
	}
	for k, p := range i.Inputs {
		q, ok := o.Inputs[k]
		if !ok || !p.Equal(q) {
			return false
		}
	}
	for k, v := range i.Outputs {
		if w, ok := o.Outputs[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// Equal reports whether p and o are the same pin.
func (p *Pin) Equal(o *Pin) bool {
	if p == nil || o == nil {
		return p == o
	}
	return *p == *o
}
