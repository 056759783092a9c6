package rootfs

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/sbx-dev/sbx/internal/build/apkrepo"
	"github.com/sbx-dev/sbx/internal/diags"
	"github.com/sbx-dev/sbx/internal/proto/imageinfo"
)

// ApkPackages are an Alpine image's pinned packages. They are fetched
// once the base image is in the tree, because where they come from and
// which keys sign them are the base's /etc/apk files unless the spec
// says otherwise.
type ApkPackages struct {
	// World are the image's requests as apk constraints, added to the
	// base's /etc/apk/world.
	World []apkrepo.Dep
	// Fetch brings the pinned packages into the cache, each checked
	// against its pin and verified, given what the base image says about
	// apk, and returns them with the keys they were verified with.
	Fetch func(ctx context.Context, base *apkrepo.Base) ([]apkrepo.Fetched, apkrepo.Keys, error)
}

// apkPackages installs an Alpine image's pinned packages with
// apkrepo.Install over the base image, which must be Alpine (it has an
// apk installed database or /etc/alpine-release).
func (a *assembler) apkPackages(ctx context.Context) error {
	fail := func(err error) error {
		return diags.WithSubject(fmt.Errorf("image %q: %w", a.img.Name, err), a.img.Packages.Range)
	}
	if a.opts.Apk.Fetch == nil {
		return fail(errors.New("no way to fetch the Alpine packages was given"))
	}
	_, isAlpine := a.tree.Lookup("/etc/alpine-release")
	if _, ok := a.tree.Lookup(apkrepo.InstalledPath); ok {
		isAlpine = true
	}
	if !isAlpine {
		return fail(fmt.Errorf("the lock pins Alpine packages, but the base image has neither /etc/alpine-release nor %s", apkrepo.InstalledPath))
	}
	base, err := apkrepo.ReadBase(a.tree)
	if err != nil {
		return fail(fmt.Errorf("the base image's apk files: %w", err))
	}
	fetched, keys, err := a.opts.Apk.Fetch(ctx, base)
	if err != nil {
		return fail(err)
	}
	if len(fetched) == 0 {
		return fail(errors.New("the image has packages, but none were fetched"))
	}
	world := make([]string, 0, len(a.opts.Apk.World))
	for _, d := range a.opts.Apk.World {
		world = append(world, d.String())
	}
	// Result lists the scripts not run; docs/packages.md says which of
	// their effects an Alpine image lacks.
	if _, err := apkrepo.Install(ctx, a.tree, keys, fetched, world); err != nil {
		return fail(err)
	}
	for _, f := range fetched {
		a.inventory = append(a.inventory, imageinfo.Package{Name: f.Pin.Name, Version: f.Pin.Version, Architecture: f.Pin.Arch})
	}
	sort.Slice(a.inventory, func(i, j int) bool { return a.inventory[i].Name < a.inventory[j].Name })
	return nil
}
