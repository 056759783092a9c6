package resolve

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/internal/build/localsrc"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/internal/recipe"
	"github.com/sbx-dev/sbx/lang"
)

// LockChange is one pin that differs between the old lock and the new.
type LockChange struct {
	Image string // image block name
	Key   string // "base", "kernel", "artifact.NAME"
	// Old is nil for a new input; New is nil for an input, or a whole
	// image, that is no longer in the configuration.
	Old, New *lockfiles.Pin
}

// Lock computes the lock for cfg from the old lock (nil for none).
//
// A pin of the old lock is kept unchanged, with no network access, while
// its source string and kind are the same as in cfg, the image's platform
// is the same (for platform-dependent kinds), it agrees with any sha256
// the spec declares and it is complete. A deb pin is also kept, with the
// new source string, when the source changed but names the pinned
// package and the pinned version satisfies its version relations (as
// Terraform keeps a provider version that still meets a changed
// constraint). Local sources (file:, oci-layout:) are always read again:
// that is cheap and keeps the lock true to the files. Every other input
// is resolved (a kernel with ResolveKernel, the rest with Resolve);
// upgrade resolves all of them, so that a deb source without an exact
// version moves to apt's current candidate. Images no longer in cfg are
// dropped. An image keeps its recorded outputs only when its input hash
// is unchanged.
//
// An image with packages gets its package pins from lockPackages: they
// are kept while the request is unchanged, and otherwise resolved again.
//
// Changes lists every pin that differs, sorted by image and key. Errors
// are diagnostics at the source's range; the lock returned with errors is
// partial (failed inputs are missing and their images have no input hash)
// and must not be written.
func (s *Set) Lock(ctx context.Context, cfg *lang.Config, old *lockfiles.Lock, upgrade bool) (*lockfiles.Lock, []LockChange, hcl.Diagnostics) {
	next := &lockfiles.Lock{Images: map[string]*lockfiles.Image{}}
	var changes []LockChange
	var diags hcl.Diagnostics

	// hostPath is part of the key: a local source is read inside the
	// directory its own image allows, and two images may allow different
	// ones.
	type memoKey struct {
		kind, raw, sha256, hostPath, platform string
		kernel                                bool
	}
	type result struct {
		pin *lockfiles.Pin
		err error
	}
	// One configuration often names a source twice (a shared base): ask
	// once per run.
	memo := map[memoKey]result{}

	for _, name := range sortedKeys(cfg.Images) {
		img := cfg.Images[name]
		platform := img.Platform.String()
		var prev *lockfiles.Image
		if old != nil {
			prev = old.Images[name]
		}
		samePlatform := prev != nil && prev.Platform == platform
		li := &lockfiles.Image{Name: name, Platform: platform, Inputs: map[string]*lockfiles.Pin{}}
		failed := false
		inputs := recipe.Inputs(img)
		for _, in := range inputs {
			var oldPin *lockfiles.Pin
			if prev != nil {
				oldPin = prev.Inputs[in.Key]
			}
			var pin *lockfiles.Pin
			if !upgrade && reusable(oldPin, in.Source, samePlatform) {
				pin = clonePin(oldPin)
				pin.Source = in.Source.Raw
			} else {
				if err := ctx.Err(); err != nil {
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Locking interrupted",
						Detail:   err.Error(),
					})
					return next, changes, diags
				}
				asKernel := in.Key == "kernel"
				k := memoKey{string(in.Source.Kind), in.Source.Raw, in.Source.SHA256, in.Source.HostPath, platform, asKernel}
				r, ok := memo[k]
				if !ok {
					r.pin, r.err = s.resolve(ctx, in.Source, img.Platform, asKernel)
					memo[k] = r
				}
				if r.err != nil {
					// The diagnostic's subject is the source's position;
					// the message need not repeat it.
					diags = append(diags, sourceDiag(in.Source, "Cannot pin source",
						fmt.Sprintf("%s of image.%s: %s", in.Key, name, strings.TrimPrefix(r.err.Error(), localsrc.Position(in.Source)))))
					failed = true
					continue
				}
				pin = clonePin(r.pin)
			}
			li.Inputs[in.Key] = pin
			if oldPin == nil || *oldPin != *pin {
				changes = append(changes, LockChange{Image: name, Key: in.Key, Old: clonePin(oldPin), New: clonePin(pin)})
			}
		}
		wanted := map[string]bool{}
		for _, in := range inputs {
			wanted[in.Key] = true
		}
		if len(img.Packages.Requests) > 0 {
			pins, err := s.lockPackages(ctx, img, li.Inputs["base"], prev, upgrade)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cannot resolve packages",
					Detail:   fmt.Sprintf("packages of image.%s: %v", name, err),
					Subject:  rangeOrNil(img.Packages.Range),
				})
				failed = true
			}
			for _, key := range sortedKeys(pins) {
				pin := pins[key]
				wanted[key] = true
				li.Inputs[key] = pin
				var oldPin *lockfiles.Pin
				if prev != nil {
					oldPin = prev.Inputs[key]
				}
				if oldPin == nil || *oldPin != *pin {
					changes = append(changes, LockChange{Image: name, Key: key, Old: clonePin(oldPin), New: clonePin(pin)})
				}
			}
		}
		if prev != nil {
			for key, p := range prev.Inputs {
				if !wanted[key] {
					changes = append(changes, LockChange{Image: name, Key: key, Old: clonePin(p)})
				}
			}
		}
		if !failed {
			h, err := s.inputHash(img, li.Inputs)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cannot compute input hash",
					Detail:   fmt.Sprintf("image.%s: %v", name, err),
					Subject:  rangeOrNil(img.DeclRange),
				})
			} else {
				li.InputHash = h
				li.ProvisionHash = recipe.ProvisionHash(img)
				if prev != nil && h != "" && prev.InputHash == h && prev.ProvisionHash == li.ProvisionHash && len(prev.Outputs) > 0 {
					li.Outputs = maps.Clone(prev.Outputs)
				}
			}
		}
		next.Images[name] = li
	}

	if old != nil {
		for name, prev := range old.Images {
			if _, ok := cfg.Images[name]; ok {
				continue
			}
			for key, p := range prev.Inputs {
				changes = append(changes, LockChange{Image: name, Key: key, Old: clonePin(p)})
			}
		}
	}
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].Image != changes[j].Image {
			return changes[i].Image < changes[j].Image
		}
		return changes[i].Key < changes[j].Key
	})
	return next, changes, diags
}

// reusable reports whether an old pin still answers for src.
func reusable(p *lockfiles.Pin, src *lang.Source, samePlatform bool) bool {
	if p == nil || p.Kind != string(src.Kind) {
		return false
	}
	if want, err := declaredSHA256(src); err != nil || (want != "" && p.SHA256 != want) {
		return false
	}
	if src.Kind == lang.SourceDeb {
		return samePlatform && debReusable(p, src)
	}
	if p.Source != src.Raw {
		return false
	}
	isDigest := func(s string) bool { return strings.HasPrefix(s, "sha256:") && len(s) == len("sha256:")+64 }
	switch src.Kind {
	case lang.SourceOCI:
		return samePlatform && isDigest(p.Digest) && isDigest(p.Manifest)
	case lang.SourceNPM:
		return p.Version != "" && p.Integrity != "" && p.SHA256 != ""
	case lang.SourceURL:
		return p.SHA256 != ""
	}
	// file:, oci-layout: and unknown kinds are resolved every time.
	return false
}

// debReusable reports whether the complete deb pin p answers for src: it
// was made from the same source string, or from another one for the same
// package whose pinned version satisfies src's relations. A kernel pin
// that followed a meta package is kept only for the same source string:
// its version is the image package's, not the meta package's that the
// relations speak of.
func debReusable(p *lockfiles.Pin, src *lang.Source) bool {
	pkg, version, _, ok := splitDebFilename(p.Filename)
	if !ok || p.SHA256 == "" || p.Version == "" || version != p.Version {
		return false
	}
	if p.Source == src.Raw {
		return true
	}
	return pkg == src.Ref && debSatisfies(p.Version, src.DebRelations())
}

func clonePin(p *lockfiles.Pin) *lockfiles.Pin {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

func sourceDiag(src *lang.Source, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  rangeOrNil(src.Range),
	}
}

// rangeOrNil returns a pointer to a copy of r, or nil when r is unset.
func rangeOrNil(r hcl.Range) *hcl.Range {
	if r.Filename == "" {
		return nil
	}
	return &r
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
