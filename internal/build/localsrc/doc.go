// Package localsrc opens local sources, file: and oci-layout:, inside the
// directory lang.Source.LocalRoot confines them to: the configuration
// directory, or the image's host_paths entry that holds them. The
// directory is opened as an os.Root and every path below it resolved
// inside it, so that neither ".." nor a symbolic link (in the path, or
// planted in a layout's blobs/) reads a host file the spec did not name.
// Symbolic links that stay inside the directory are followed.
//
// Locking (package internal/build/resolve), fetching (package internal/build/fetch)
// and building (package internal/build/image) all read local sources through
// it, so that the three cannot disagree on what a spec may read. Errors
// name the spec position (Position), the source and the host path.
//
// Package localsrc does not hash or verify what it opens; its callers
// check the bytes against the pin (package internal/build/digest).
//
// The entry points are OpenFile and OpenLayout.
package localsrc
