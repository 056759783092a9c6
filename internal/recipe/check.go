package recipe

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sbx-dev/sbx/addrs"
	"github.com/sbx-dev/sbx/internal/lockfiles"
	"github.com/sbx-dev/sbx/lang"
)

// CheckLocked reports, for -lockfile=readonly, every way in which l is not
// the lock `sbx lock` would write for cfg's images: an image or input
// that is not locked, a pin for another source string, kind or declared
// sha256, a platform change, pins the configuration no longer uses, and an
// input hash that no longer matches (see CheckImageLocked). Each problem is
// one error diagnostic pointing at the source or image block concerned; a
// lock entry for an image the configuration no longer declares has no
// source range. l may be nil (no lock file).
func CheckLocked(cfg *lang.Config, l *lockfiles.Lock) hcl.Diagnostics {
	if cfg == nil {
		return nil
	}
	var diags hcl.Diagnostics
	names := make([]string, 0, len(cfg.Images))
	for name := range cfg.Images {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		img := cfg.Images[name]
		for _, p := range imageProblems(img, l.Lookup(name)) {
			r := p.subject
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Lock file is out of date",
				Detail:   p.err.Error() + ".",
				Subject:  &r,
			})
		}
	}
	if l != nil {
		var stale []string
		for name := range l.Images {
			if _, ok := cfg.Images[name]; !ok {
				stale = append(stale, name)
			}
		}
		sort.Strings(stale)
		for _, name := range stale {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Lock file is out of date",
				Detail:   fmt.Sprintf("The lock pins %s, which the configuration no longer declares; run `sbx lock`.", addrs.ImageRef(name)),
			})
		}
	}
	return diags
}

// CheckImageLocked reports whether the lock entry l is up to date for img:
// the platform matches, every recipe input has a pin whose source string
// and kind are the ones the spec declares (and whose sha256 is the one the
// spec declares, if it declares one), an image with packages has a
// "packages" pin for the requests as written (its package.NAME pins are
// then expected), the lock pins nothing the spec no longer uses, and the
// recorded input hash is InputHash(img, l.Inputs). l
// may be nil (the image is not locked).
//
// Every problem found is reported, each naming the image and the input
// (and, for a changed source, both source strings), joined into one error;
// nil means the lock is up to date. The remedy is always to run `sbx lock`.
func CheckImageLocked(img *lang.Image, l *lockfiles.Image) error {
	if img == nil {
		return errors.New("no image to check")
	}
	var errs []error
	for _, p := range imageProblems(img, l) {
		errs = append(errs, p.err)
	}
	return errors.Join(errs...)
}

// problem is one way a lock entry is out of date, with the spec range it
// concerns.
type problem struct {
	err     error
	subject hcl.Range
}

func imageProblems(img *lang.Image, l *lockfiles.Image) []problem {
	addr := img.Addr()
	if l == nil {
		return []problem{{fmt.Errorf("%s is not locked; run `sbx lock`", addr), img.DeclRange}}
	}
	var ps []problem
	add := func(r hcl.Range, format string, args ...any) {
		ps = append(ps, problem{fmt.Errorf(format, args...), r})
	}
	if want := img.Platform.String(); l.Platform != want {
		add(img.DeclRange, "%s: the lock is for platform %q but the spec declares %q; run `sbx lock`", addr, l.Platform, want)
	}
	used := map[string]bool{}
	for _, in := range Inputs(img) {
		used[in.Key] = true
		pin := l.Inputs[in.Key]
		src := in.Source
		switch {
		case src == nil:
			add(img.DeclRange, "%s: %s has no source", addr, in.Key)
		case pin == nil:
			add(src.Range, "%s: %s is not locked; run `sbx lock`", addr, in.Key)
		case pin.Source != src.Raw:
			add(src.Range, "%s: %s is locked for source %q but the spec declares %q; run `sbx lock`", addr, in.Key, pin.Source, src.Raw)
		case pin.Kind != string(src.Kind):
			add(src.Range, "%s: %s is locked as a %q source but the spec's %q is a %q source; run `sbx lock`", addr, in.Key, pin.Kind, src.Raw, src.Kind)
		case src.SHA256 != "" && pin.SHA256 != src.SHA256:
			add(src.Range, "%s: %s is locked with sha256 %q but the spec declares %q for %q; run `sbx lock`", addr, in.Key, pin.SHA256, src.SHA256, src.Raw)
		}
	}
	if reqs := img.Packages.Requests; len(reqs) > 0 {
		want := strings.Join(reqs, ", ")
		pin := l.Inputs[lockfiles.PackagesKey]
		switch {
		case pin == nil:
			add(img.Packages.Range, "%s: packages are not locked; run `sbx lock`", addr)
		case pin.Kind != lockfiles.KindDebPackages && pin.Kind != lockfiles.KindApkPackages:
			add(img.Packages.Range, "%s: packages are locked as %q, not a Debian or Alpine package set; run `sbx lock`", addr, pin.Kind)
		case pin.Source != want:
			add(img.Packages.Range, "%s: packages are locked for %q but the spec declares %q; run `sbx lock`", addr, pin.Source, want)
		}
		used[lockfiles.PackagesKey] = true
		for key := range l.Inputs {
			if strings.HasPrefix(key, lockfiles.PackageKeyPrefix) {
				used[key] = true
			}
		}
	}
	var extra []string
	for key := range l.Inputs {
		if !used[key] {
			extra = append(extra, key)
		}
	}
	sort.Strings(extra)
	for _, key := range extra {
		var was string
		if p := l.Inputs[key]; p != nil {
			was = p.Source
		}
		add(img.DeclRange, "%s: the lock pins %s (%q), which the spec no longer declares; run `sbx lock`", addr, key, was)
	}
	if len(ps) > 0 {
		return ps
	}
	h, err := InputHash(img, l.Inputs)
	if err != nil {
		return []problem{{err, img.DeclRange}}
	}
	if h != l.InputHash {
		add(img.DeclRange, "%s: the lock's input hash %s is not the spec's %s (a setting that affects the image changed since the lock was written); run `sbx lock`", addr, l.InputHash, h)
	}
	if ph := ProvisionHash(img); ph != l.ProvisionHash {
		switch {
		case ph == "":
			add(img.DeclRange, "%s: the lock records provision steps (provision_hash %s) the spec no longer declares; run `sbx lock`", addr, l.ProvisionHash)
		case l.ProvisionHash == "":
			add(img.Provision[0].DeclRange, "%s: the spec's provision steps are not in the lock; run `sbx lock`", addr)
		default:
			add(img.Provision[0].DeclRange, "%s: the lock's provision hash %s is not the spec's %s (a provision step changed since the lock was written); run `sbx lock`", addr, l.ProvisionHash, ph)
		}
	}
	return ps
}
