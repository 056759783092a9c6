package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/archive"
	"github.com/sbx-dev/sbx/internal/build/fetch"
	"github.com/sbx-dev/sbx/internal/build/layers"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/lang"
)

// artifact places one artifact.
func (a *assembler) artifact(ctx context.Context, art *lang.Artifact) error {
	src := "?"
	if art.Source != nil {
		src = art.Source.Raw
	}
	what := fmt.Sprintf("image %q: artifact %q (%s)", a.img.Name, art.Name, src)
	in, ok := a.inputs["artifact."+art.Name]
	if !ok {
		return diags.WithSubject(fmt.Errorf("%s: not fetched", what), art.DeclRange)
	}
	blob, cleanup, err := a.blob(ctx, in)
	if err != nil {
		return diags.WithSubject(fmt.Errorf("%s: %w", what, a.limitError(err)), art.DeclRange)
	}
	defer cleanup()
	if art.Extract {
		err = a.extract(ctx, art, blob)
	} else {
		err = a.place(art, blob, in.File == nil)
	}
	if err != nil {
		return diags.WithSubject(fmt.Errorf("%s: %w", what, a.limitError(err)), art.DeclRange)
	}
	return nil
}

// blob returns the path of the file an input was fetched into. An OCI image
// is flattened and written as one tar file first, so that it is read like
// any other archive; cleanup removes that copy.
func (a *assembler) blob(ctx context.Context, in fetch.Fetched) (string, func(), error) {
	if in.File != nil {
		return in.File.Path, func() {}, nil
	}
	if in.Manifest == nil {
		return "", nil, errors.New("the fetched input holds neither a file nor an OCI image")
	}
	t, err := a.newTree()
	if err != nil {
		return "", nil, err
	}
	defer t.Close()
	for _, b := range in.Layers {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		l := layers.FileLayer(b.Path, b.MediaType)
		l.Name = b.Digest
		if err := t.Apply(l); err != nil {
			return "", nil, err
		}
	}
	f, err := os.CreateTemp(a.opts.TempDir, "sbx-rootfs-oci-*.tar")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	err = t.WriteTar(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return f.Name(), cleanup, nil
}

// place puts one file at the artifact's dest: the file art.File names in
// the archive at blob, or blob itself when art.File is empty. image says
// the blob is a flattened OCI image, which is no file to place.
func (a *assembler) place(art *lang.Artifact, blob string, image bool) error {
	dest := art.Dest
	if err := a.checkParents(dest); err != nil {
		return fmt.Errorf("dest %w", err)
	}
	if e, ok := a.tree.Lookup(dest); ok && e.Type == tar.TypeDir {
		return fmt.Errorf("dest %s is a directory in the image; a file cannot replace it (set extract = true to unpack an archive into it)", dest)
	}
	e := layers.Entry{Path: dest, Type: tar.TypeReg, Mode: int64(art.Mode), UID: art.UID, GID: art.GID}
	if art.File != "" {
		// Streamed from the archive into the tree: an artifact may be a
		// binary of hundreds of megabytes.
		return archive.ExtractFileTo(blob, art.File, func(hdr *tar.Header, body io.Reader) error {
			e.Size = hdr.Size
			if e.Mode == 0 {
				e.Mode = 0o644
				if hdr.Mode&0o111 != 0 {
					e.Mode = 0o755
				}
			}
			return a.tree.Add(e, body)
		})
	}
	if image {
		return errors.New("an OCI image is not a single file: name one with file, or set extract = true")
	}
	f, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	e.Size = fi.Size()
	if e.Mode == 0 {
		e.Mode = 0o644
	}
	return a.tree.Add(e, f)
}

// extract unpacks the whole archive at blob under the artifact's dest.
func (a *assembler) extract(ctx context.Context, art *lang.Artifact, blob string) error {
	dest := art.Dest
	if err := a.checkParents(dest); err != nil {
		return fmt.Errorf("dest %w", err)
	}
	own := art.UID != 0 || art.GID != 0
	switch e, ok := a.tree.Lookup(dest); {
	case !ok:
		d := layers.Entry{Path: dest, Type: tar.TypeDir, Mode: 0o755}
		if own {
			d.UID, d.GID = art.UID, art.GID
		}
		if err := a.tree.Add(d, nil); err != nil {
			return err
		}
	case e.Type == tar.TypeSymlink:
		return fmt.Errorf("dest %s is a symbolic link to %s; links in the image are never followed, so name the directory it points at", dest, e.Linkname)
	case e.Type != tar.TypeDir:
		return fmt.Errorf("dest %s is a %s in the image, not a directory to unpack into", dest, layers.TypeName(e.Type))
	}
	var links []layers.Entry
	dropped := map[string]bool{} // devices left out, by archive name
	err := archive.WalkFile(blob, func(hdr *tar.Header, body io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := archive.CheckEntry(hdr); err != nil {
			return fmt.Errorf("unsafe entry: %w", err)
		}
		e := layers.Entry{
			Path: path.Join(dest, hdr.Name), Type: hdr.Typeflag, Mode: hdr.Mode & 0o7777,
			UID: hdr.Uid, GID: hdr.Gid, Linkname: hdr.Linkname,
			Devmajor: hdr.Devmajor, Devminor: hdr.Devminor, Xattrs: xattrs(hdr),
		}
		if !art.KeepSpecial && dropSpecial(&e) {
			dropped[hdr.Name] = true
			return nil
		}
		if own {
			e.UID, e.GID = art.UID, art.GID
		}
		if e.Type == 0 { // a pre-POSIX regular file (tar.TypeRegA)
			e.Type = tar.TypeReg
		}
		if err := a.checkParents(e.Path); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		old, exists := a.tree.Lookup(e.Path)
		switch e.Type {
		case tar.TypeLink:
			if dropped[archive.CleanName(hdr.Linkname)] {
				return nil // a link to a device left out
			}
			e.Linkname = path.Join(dest, archive.CleanName(hdr.Linkname))
			links = append(links, e)
			return nil
		case tar.TypeReg:
			e.Size = hdr.Size
		case tar.TypeDir:
			if exists && old.Type == tar.TypeSymlink {
				return fmt.Errorf("entry %q is a directory, but the image has a symbolic link to %s at %s; links in the image are never followed or replaced by directories", hdr.Name, old.Linkname, e.Path)
			}
		case tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		default:
			return fmt.Errorf("entry %q: unsupported entry type %q", hdr.Name, hdr.Typeflag)
		}
		if exists && old.Type == tar.TypeDir && e.Type != tar.TypeDir {
			return fmt.Errorf("entry %q is a %s, but %s is a directory in the image", hdr.Name, layers.TypeName(e.Type), e.Path)
		}
		if err := a.tree.Add(e, body); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Hard links last, once every target is in place, whatever the
	// archive's order.
	for _, l := range links {
		if err := a.tree.Add(l, nil); err != nil {
			return fmt.Errorf("entry %q: %w", strings.TrimPrefix(strings.TrimPrefix(l.Path, dest), "/"), err)
		}
	}
	return nil
}

// capabilityXattr holds a file's capabilities, which a program gains when
// it is run, as a setuid bit gives it its owner's identity.
const capabilityXattr = "security.capability"

// dropSpecial strips an entry of an extracted archive of what would give
// whoever runs or opens it more than the archive's files: the setuid and
// setgid bits and file capabilities are removed, and it reports true for a
// character or block device, which is left out. The spec keeps them with
// keep_special = true.
func dropSpecial(e *layers.Entry) bool {
	if e.Type == tar.TypeChar || e.Type == tar.TypeBlock {
		return true
	}
	e.Mode &^= 0o6000
	delete(e.Xattrs, capabilityXattr)
	return false
}

// xattrs returns the extended attributes a PAX header carries.
func xattrs(hdr *tar.Header) map[string]string {
	var x map[string]string
	for k, v := range hdr.PAXRecords {
		if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if x == nil {
				x = map[string]string{}
			}
			x[name] = v
		}
	}
	return x
}
