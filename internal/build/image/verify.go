package image

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Mismatch is one output whose rebuilt digest differs from an expected one.
type Mismatch struct {
	// Output is the output's name (OutputDisk, …).
	Output string
	// Want is the expected digest, Got the rebuilt one.
	Want, Got string
	// Against says where Want comes from: "the cached build" or "the
	// lock file".
	Against string
	// Provisioned says the output is the disk the image's provision
	// steps made, which a rebuild need not reproduce.
	Provisioned bool
}

// VerifyError reports that rebuilding an image from scratch gave other
// bytes than the cached build or the lock's recorded hashes.
type VerifyError struct {
	Image    string
	BuildKey string
	Diffs    []Mismatch
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	if e.NotHermetic() {
		fmt.Fprintf(&b, "image %q is not hermetic: its base rebuilt to the same bytes, and running its provision steps again gave another disk:", e.Image)
	} else {
		fmt.Fprintf(&b, "image %q did not rebuild to the same bytes:", e.Image)
	}
	for _, d := range e.Diffs {
		what := "output " + d.Output
		if d.Provisioned {
			what = "provisioned " + d.Output
		}
		fmt.Fprintf(&b, "\n  %s: rebuilt %s, %s has %s", what, d.Got, d.Against, d.Want)
	}
	return b.String()
}

// NotHermetic reports whether only the provisioned disk differs: the
// recipe's own outputs rebuilt to the same bytes.
func (e *VerifyError) NotHermetic() bool {
	for _, d := range e.Diffs {
		if !d.Provisioned {
			return false
		}
	}
	return len(e.Diffs) > 0
}

// Outputs returns the names of the outputs that differ, each once, in
// order.
func (e *VerifyError) Outputs() []string {
	var names []string
	for _, d := range e.Diffs {
		if len(names) == 0 || names[len(names)-1] != d.Output {
			names = append(names, d.Output)
		}
	}
	return names
}

// verify makes sure a reference build is in the cache, rebuilds from
// scratch in a temporary directory and compares.
func (b *build) verify(ctx context.Context) (*Result, error) {
	ref, ok := b.cached(ctx)
	if !ok {
		var err error
		if ref, err = b.buildAndStore(ctx); err != nil {
			return nil, err
		}
	}
	b.stage(StageVerify)
	dir, err := os.MkdirTemp(b.opts.TempDir, "sbx-verify-*")
	if err != nil {
		return nil, fmt.Errorf("image %q: staging directory: %w", b.img.Name, err)
	}
	defer os.RemoveAll(dir)
	s, err := b.run(ctx, dir)
	if err != nil {
		return nil, err
	}
	var diffs []Mismatch
	for _, name := range outputOrder {
		got := s.outputs[name].Digest
		if want := ref.Outputs[name].Digest; want != got {
			diffs = append(diffs, Mismatch{Output: name, Want: want, Got: got, Against: "the cached build"})
		}
		if b.provHash != "" && name == OutputDisk {
			continue // the lock records the provisioned disk
		}
		if want, ok := b.lock.Outputs[name]; ok && want != got {
			diffs = append(diffs, Mismatch{Output: name, Want: want, Got: got, Against: "the lock file"})
		}
	}
	if len(diffs) > 0 || b.provHash == "" {
		if len(diffs) > 0 {
			return ref, &VerifyError{Image: b.img.Name, BuildKey: b.key, Diffs: diffs}
		}
		return ref, nil
	}
	return b.verifyProvisioned(ctx, ref, s)
}

// verifyProvisioned runs the provision steps again on the rebuilt base s
// (whose outputs are those of ref) and compares the disk they give with
// the cached provisioned build's (made first if there is none) and the
// lock's.
func (b *build) verifyProvisioned(ctx context.Context, base *Result, s *staged) (*Result, error) {
	ref, err := b.provisioned(ctx, base)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.opts.TempDir, "sbx-verify-*")
	if err != nil {
		return nil, fmt.Errorf("image %q: staging directory: %w", b.img.Name, err)
	}
	defer os.RemoveAll(dir)
	rebuilt := *base
	rebuilt.Outputs = map[string]Output{}
	for name, o := range s.outputs {
		rebuilt.Outputs[name] = Output{Path: s.files[name], Digest: o.Digest, Size: o.Size}
	}
	disk, err := b.runProvision(ctx, &rebuilt, dir)
	if err != nil {
		return nil, err
	}
	got, _, err := hashFile(ctx, disk)
	if err != nil {
		return nil, fmt.Errorf("image %q: provisioned disk: %w", b.img.Name, err)
	}
	var diffs []Mismatch
	if want := ref.Outputs[OutputDisk].Digest; want != got {
		diffs = append(diffs, Mismatch{Output: OutputDisk, Want: want, Got: got, Against: "the cached build", Provisioned: true})
	}
	if want, ok := b.lock.Outputs[OutputDisk]; ok && want != got {
		diffs = append(diffs, Mismatch{Output: OutputDisk, Want: want, Got: got, Against: "the lock file", Provisioned: true})
	}
	if len(diffs) > 0 {
		return ref, &VerifyError{Image: b.img.Name, BuildKey: b.provKey, Diffs: diffs}
	}
	return ref, nil
}
