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
	fmt.Fprintf(&b, "image %q did not rebuild to the same bytes:", e.Image)
	for _, d := range e.Diffs {
		fmt.Fprintf(&b, "\n  output %s: rebuilt %s, %s has %s", d.Output, d.Got, d.Against, d.Want)
	}
	return b.String()
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
		if want, ok := b.lock.Outputs[name]; ok && want != got {
			diffs = append(diffs, Mismatch{Output: name, Want: want, Got: got, Against: "the lock file"})
		}
	}
	if len(diffs) > 0 {
		return ref, &VerifyError{Image: b.img.Name, BuildKey: b.key, Diffs: diffs}
	}
	return ref, nil
}
